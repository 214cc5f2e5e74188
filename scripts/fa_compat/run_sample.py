#!/usr/bin/env python3
"""Runs a random sample of flash_attn 2.x's own tests/test_flash_attn.py against flashcore through
the import shim beside this file, on a GPU machine, and prints pass / fail / skip counts with the
failures grouped by reason (a missing function or option, or a wrong number).

    python3 scripts/fa_compat/run_sample.py PATH/TO/test_flash_attn.py [--fraction 0.002] [--seed 0]

The test file is fetched from Dao-AILab/flash-attention at test time and never committed. Needs
einops and a CUDA build of libflashcore_c.so (FLASHCORE_LIBRARY) with python/ importable.
"""
import argparse
import collections
import os
import pathlib
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# (pattern in the failure text, reason): first match wins.
# (pattern in the failure's message, i.e. its exception line, reason): first match wins. The
# traceback is not searched: the tests' own source lines (dropout_p=..., kvcache) appear in it.
REASONS = [
    (r"has no kernel for dtype|no CUDA kernel for|FLASHCORE_HEAD_DIMS", "not in this trimmed build"),
    (r"dropout_p", "dropout"),
    (r"flash_attn_with_kvcache|apply_rotary_emb|block_table", "KV cache"),
    (r"flash_attn_gpu|_flash_attn_varlen_forward|_flash_attn_forward", "flash_attn's internal entry points"),
    (r"NotImplementedError", "other missing option"),
    (r"out of memory", "out of memory"),
    (r"illegal memory access", "CUDA illegal memory access (then every later case)"),
    (r"AssertionError|^assert ", "wrong number"),
]


def reason_of(message, text):
    for source in (message, text):
        for pattern, reason in REASONS:
            if re.search(pattern, source, re.MULTILINE):
                return reason
    first = (message or text).strip().splitlines()
    return first[0][:100] if first else "unknown"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("test_file")
    parser.add_argument("--fraction", type=float, default=0.002)
    parser.add_argument("--seed", default="0")
    parser.add_argument("--out", default=os.environ.get("OUT", "build"))
    parser.add_argument("--budget", type=float, default=0, help="seconds of running after which the rest skip")
    parser.add_argument("-k", dest="select", default="", help="pytest -k expression: only the matching tests")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    junit = out / "fa_compat_junit.xml"
    env = dict(os.environ, FA_SAMPLE_FRACTION=str(args.fraction), FA_SAMPLE_SEED=args.seed, FA_SAMPLE_BUDGET=str(args.budget),
               PYTHONPATH=os.pathsep.join([str(HERE), str(ROOT / "python"), os.environ.get("PYTHONPATH", "")]))
    command = [sys.executable, "-m", "pytest", args.test_file, "-p", "fa_sample", "-p", "no:cacheprovider", "-q",
               "--junitxml", str(junit), "-o", "junit_family=xunit1"] + (["-k", args.select] if args.select else [])
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    counts = collections.Counter()
    reasons = collections.Counter()
    by_function = collections.defaultdict(collections.Counter)
    for case in ET.parse(junit).getroot().iter("testcase"):
        function = case.get("name", "").split("[")[0]
        failure = case.find("failure") if case.find("failure") is not None else case.find("error")
        if failure is not None:
            counts["failed"] += 1
            reason = reason_of(failure.get("message") or "", (failure.text or "").strip().splitlines()[-1:][0]
                               if (failure.text or "").strip() else "")
            reasons[reason] += 1
            by_function[function]["failed: " + reason] += 1
        elif case.find("skipped") is not None:
            budget = "time budget" in (case.find("skipped").get("message") or "")
            counts["not run (time budget)" if budget else "skipped"] += 1
            by_function[function]["not run" if budget else "skipped"] += 1
        else:
            counts["passed"] += 1
            by_function[function]["passed"] += 1
    total = sum(counts.values())
    print(f"fa_compat: {total} cases sampled (fraction {args.fraction}, seed {args.seed}): "
          f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped, "
          f"{counts['not run (time budget)']} not run (time budget)")
    for reason, n in reasons.most_common():
        print(f"  failed {n:5d}  {reason}")
    for function in sorted(by_function):
        print(f"  {function}: " + ", ".join(f"{k} {v}" for k, v in by_function[function].most_common()))


if __name__ == "__main__":
    main()
