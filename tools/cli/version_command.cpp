// See version_command.h. Everything printed comes from flashcore::build_info(), so the CLI reports
// the library it runs, not the one it was compiled against.
#include "version_command.h"

#include <cstdio>
#include <string>

#include "flashcore/build_info.h"
#include "run_command.h"
#include "runner.h"

namespace flashcore::cli {

int version_command() {
  const BuildInfo info = build_info();
  std::printf("flashcore %s\n", info.version);
  if (!info.with_cuda) {
    std::printf("  kernel families  none (a CPU-only build: the CPU backends only)\n");
    std::printf("  CUDA             none\n");
    return kExitOk;
  }
  std::printf("  kernel families  %s\n", info.kernel_families);
  std::printf("  GPU code         %s\n", info.cuda_architectures);
  std::printf("  CUDA             %s (runtime %s)\n", info.cuda_version,
              info.cuda_runtime_static ? "linked statically" : "libcudart.so");
  const std::string device = cuda_device_present() ? cuda_device_name() : std::string("none found");
  std::printf("  GPU              %s\n", device.c_str());
  return kExitOk;
}

}  // namespace flashcore::cli
