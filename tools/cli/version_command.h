// `flashcore --version`: the library's version, the GPU kernel families and GPU code in this build,
// the CUDA toolkit that built it, and the GPU found (if any).
#pragma once

namespace flashcore::cli {

int version_command();

}  // namespace flashcore::cli
