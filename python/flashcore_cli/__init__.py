"""The `flashcore` console script: runs the C++ CLI bundled in the flashcore package
(flashcore/bin/flashcore) with the same arguments and exit code: `flashcore run ...`,
`flashcore fuzz ...`, `flashcore --version`.

A package of its own, so that starting the CLI does not import flashcore (and with it torch): the
binary is found without importing anything.
"""

import importlib.util
import os
import pathlib
import sys


def cli_path():
    spec = importlib.util.find_spec("flashcore")
    if spec is None or not spec.submodule_search_locations:
        return None
    return pathlib.Path(list(spec.submodule_search_locations)[0]) / "bin" / "flashcore"


def main():
    path = cli_path()
    if path is None or not path.is_file():
        sys.stderr.write(f"flashcore: the bundled CLI ({path}) is missing: install flashcore from a wheel or with "
                         "`pip install ./python` (a source checkout's CLI is build/<preset>/tools/flashcore)\n")
        return 1
    # Replace this process: signals, exit codes and output go straight to the caller.
    os.execv(path, [str(path)] + sys.argv[1:])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
