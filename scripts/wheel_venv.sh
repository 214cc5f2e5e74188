#!/usr/bin/env bash
# Installs a flashcore wheel into a fresh virtual environment that also sees another Python's
# packages (torch, pytest, numpy), as a user's environment with PyTorch already in it would:
#   bash scripts/wheel_venv.sh PYTHON VENV_DIR WHEEL
# PYTHON is the interpreter that has torch (it may itself be a venv, whose packages
# `--system-site-packages` would not reach, so its site-packages are added with a .pth file).
# Nothing is downloaded: the wheel is installed with --no-index --no-deps (the requirement
# torch >= 2.4 is checked here instead). Prints the install time.
set -euo pipefail
python="$1" venv="$2" wheel="$3"
rm -rf "$venv"
# Without ensurepip (a distribution's python3 lacking its -venv package), a venv without pip, which
# PYTHON's pip then installs into (pip --python).
pip=("$venv/bin/python" -m pip)
if ! "$python" -m venv "$venv" 2>/dev/null; then
  rm -rf "$venv"
  "$python" -m venv --without-pip "$venv"
  pip=("$python" -m pip --python "$venv/bin/python")
fi
"$python" -c 'import site, sysconfig; print("\n".join(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()])))' \
  >"$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/beside.pth"
"$venv/bin/python" - <<'PY'
import torch
major, minor = (int(p) for p in torch.__version__.split(".")[:2])
assert (major, minor) >= (2, 4), f"flashcore needs torch >= 2.4, this environment has {torch.__version__}"
print(f"wheel_venv: torch {torch.__version__} from {torch.__file__}")
PY
start=$(date +%s.%N)
# --ignore-installed: a flashcore already in PYTHON's packages (a source install) stays untouched.
"${pip[@]}" install -q --disable-pip-version-check --no-index --no-deps --ignore-installed "$wheel"
end=$(date +%s.%N)
echo "wheel_venv: installed $(basename "$wheel") ($(stat -c %s "$wheel") bytes) into $venv in $(python3 -c "print(f'{$end - $start:.1f}')") s"
