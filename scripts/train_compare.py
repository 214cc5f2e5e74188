#!/usr/bin/env python3
"""Issue 16's training comparison on a GPU: a few hundred steps of python/tests/training_twin.py
(flashcore varlen + sliding window + dropout vs its SDPA twin with the same masking as an explicit
mask; the noise band from the twin under two dropout seeds). Writes the curves as JSON.

    FLASHCORE_LIBRARY=... PYTHONPATH=python:python/tests python3 scripts/train_compare.py OUT.json [--steps 300]
"""
import argparse
import json
import pathlib
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "python" / "tests"))
import training_twin  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    start = time.time()
    result = training_twin.compare(args.device, args.steps)
    result["context"] = dict(device=torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
                             torch=torch.__version__, seconds=round(time.time() - start, 1))
    diffs = result["max_block_diff"]
    result["within_noise"] = diffs["flash_vs_twin_a"] <= 2 * diffs["twin_a_vs_twin_b"]
    pathlib.Path(args.out).write_text(json.dumps(result, indent=1))
    means = result["block_means"]
    print(f"block means (every {result['config']['block']} steps):")
    for name in ("flash", "twin_a", "twin_b"):
        print(f"  {name:7s}", " ".join(f"{m:.3f}" for m in means[name]))
    print("max block-mean differences:", {k: round(v, 4) for k, v in diffs.items()},
          "within noise (<= 2x twin vs twin):", result["within_noise"], f"({result['context']['seconds']} s)")


if __name__ == "__main__":
    main()
