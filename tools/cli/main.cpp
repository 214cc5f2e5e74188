// flashcore: run attention on random data, time it, and check it against the float64 reference
// (`flashcore run`), or check many random problems (`flashcore fuzz`). See `flashcore --help`;
// exit codes in run_command.h.
#include <cstdio>
#include <string>
#include <string_view>

#include "fuzz_command.h"
#include "options.h"
#include "run_command.h"
#include "version_command.h"

int main(int argc, char** argv) {
  using namespace flashcore::cli;
  if (argc > 1 && std::string_view(argv[1]) == "fuzz") return fuzz_command(argc - 1, argv + 1);
  if (argc > 1 && std::string_view(argv[1]) == "--version") return version_command();
  Options options;
  bool help = false;
  std::string error;
  if (!parse_options(argc, argv, &options, &help, &error)) {
    std::fprintf(stderr, "flashcore: %s\n%s", error.c_str(), usage().c_str());
    return kExitUsage;
  }
  if (help) {
    std::printf("%s", usage().c_str());
    std::printf("flashcore fuzz: random problems checked against the float64 reference (flashcore fuzz --help)\n");
    std::printf("flashcore --version: the library's version, the GPU kernel families in this build, the CUDA version\n");
    return kExitOk;
  }
  return run_command(options);
}
