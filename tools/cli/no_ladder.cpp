// The ladder entry points of a build without the teaching ladder (no CUDA, or examples off).
#include "runner.h"

namespace flashcore::cli {

std::vector<std::string> ladder_rung_names() { return {}; }
std::string ladder_rung_help() { return ""; }

std::string ladder_request_error(const std::string& rung, const Shape&, DType, bool) {
  return "--impl " + rung + ": this build has no teaching ladder";
}

Status make_ladder_executor(const std::string& rung, const Job&, std::unique_ptr<Executor>*, DType*) {
  return Status::NotSupported("--impl " + rung + ": this build has no teaching ladder");
}

}  // namespace flashcore::cli
