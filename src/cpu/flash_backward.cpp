// PLACEHOLDER: being written (issue 2).
#include "cpu/cpu_backend.h"
namespace flashcore::cpu {
Status flash_backward(const BackwardParams&, const detail::AttentionProblem&) { return Status::NotSupported("todo"); }
}
