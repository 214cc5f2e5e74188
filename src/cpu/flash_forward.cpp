// PLACEHOLDER: being written (issue 2).
#include "cpu/cpu_backend.h"
namespace flashcore::cpu {
Status flash_forward(const ForwardParams&, const detail::AttentionProblem&) { return Status::NotSupported("todo"); }
}
