// Facts about this build, for callers that want to choose a backend up front.
#include "flashcore/flashcore.h"

namespace flashcore {

bool built_with_cuda() {
#ifdef FLASHCORE_WITH_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace flashcore
