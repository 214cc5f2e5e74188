"""The `flashcore` console script: runs the C++ CLI bundled in the package (flashcore/bin/flashcore),
with the same arguments and exit code: `flashcore run ...`, `flashcore fuzz ...`, `flashcore --version`."""

import os
import pathlib
import sys

CLI_PATH = pathlib.Path(__file__).resolve().parent / "bin" / "flashcore"


def main():
    if not CLI_PATH.is_file():
        sys.stderr.write(f"flashcore: the bundled CLI {CLI_PATH} is missing: this package was not installed from a "
                         "wheel or `pip install ./python` (a source checkout's CLI is build/<preset>/tools/flashcore)\n")
        return 1
    # Replace this process: signals, exit codes and output go straight to the caller.
    os.execv(CLI_PATH, [str(CLI_PATH)] + sys.argv[1:])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
