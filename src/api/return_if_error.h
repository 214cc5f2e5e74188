// Early return on a failed Status, for code that calls several checks in a row.
#pragma once

#define FLASHCORE_RETURN_IF_ERROR(expr)  \
  do {                                   \
    ::flashcore::Status status_ = (expr); \
    if (!status_.ok()) return status_;   \
  } while (0)
