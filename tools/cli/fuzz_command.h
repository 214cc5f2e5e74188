// `flashcore fuzz`: seeded random problems checked against the float64 reference (fuzz_options.cpp
// has the flags). Exit codes as run_command.h's: 0 nothing failed, 1 a failure (or no device to
// run on), 2 bad arguments.
#pragma once

namespace flashcore::cli {

// argv[0] is "fuzz".
int fuzz_command(int argc, const char* const* argv);

}  // namespace flashcore::cli
