#!/usr/bin/env python3
"""flashcore against PyTorch SDPA's backends: TFLOP/s sweep, small-shape latency, peak memory,
charts. `python3 bench/bench.py --help`; the one-command wrapper is scripts/bench.sh."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from flashbench.supervisor import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
