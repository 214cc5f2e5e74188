#include "flashcore/cpu_threads.h"

#include <string>

#include "cpu/openmp_runtime.h"

namespace flashcore {

Status use_openmp_threads(const char* runtime_library) {
  std::string error;
  if (!cpu::use_openmp_runtime(runtime_library, &error))
    return Status::InvalidArgument("flashcore::use_openmp_threads: runtime_library: " + error);
  return Status::Ok();
}

}  // namespace flashcore
