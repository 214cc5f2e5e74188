#!/usr/bin/env bash
# Exit 0 when an NVIDIA GPU is usable here (nvidia-smi lists one), else 1.
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '
