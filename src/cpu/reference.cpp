// PLACEHOLDER: being written (issue 2).
#include "cpu/cpu_backend.h"
namespace flashcore::cpu {
Status reference_forward(const ForwardParams&, const detail::AttentionProblem&) { return Status::NotSupported("todo"); }
Status reference_backward(const BackwardParams&, const detail::AttentionProblem&) { return Status::NotSupported("todo"); }
}
