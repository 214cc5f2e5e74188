// Early return on a failed Status (the CLI's copy of the library's private macro).
#pragma once

#define FLASHCORE_CLI_RETURN_IF_ERROR(expr) \
  do {                                      \
    ::flashcore::Status status_ = (expr);   \
    if (!status_.ok()) return status_;      \
  } while (0)
