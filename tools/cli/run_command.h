// `flashcore run`: resolve the device and implementation, run, check, report.
#pragma once

#include "options.h"

namespace flashcore::cli {

// Exit codes of the CLI.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;  // a library error, or --check found an error above its bound
inline constexpr int kExitUsage = 2;   // bad arguments

int run_command(const Options& options);

}  // namespace flashcore::cli
