#!/usr/bin/env python3
"""Nsight Compute profile of flashcore's kernels for one shape, via the C++ CLI: tensor-pipe
utilisation, SM and DRAM throughput, registers, shared memory, occupancy and local-memory (spill)
traffic, written as JSON and markdown beside the benchmark results.

  python3 bench/profile.py [--cli build/sm90-sm90a/tools/flashcore] [--out-dir bench/results]
                           [--backward] [-- <CLI arguments replacing the default shape>]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from flashbench import context, ncu, options, results  # noqa: E402

DEFAULT_TARGET = ["run", "--device", "cuda", "--batch", "4", "--seqlen", "4096", "--heads", "16", "--head-dim", "128",
                  "--dtype", "bf16", "--repeats", "3", "--warmup", "1"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cli", default=os.path.join(options.REPO_ROOT, "build", "sm90-sm90a", "tools", "flashcore"))
    p.add_argument("--ncu", help="path to ncu (default: PATH, then /usr/local/cuda*/bin)")
    p.add_argument("--out-dir", default=os.path.join(options.REPO_ROOT, "bench", "results"))
    p.add_argument("--name", help="default profile_<device>_<date>_<commit>")
    p.add_argument("--commit")
    p.add_argument("--backward", action="store_true", help="add --backward to the CLI run (profiles both passes)")
    p.add_argument("--launch-count", type=int, default=40, help="kernel launches profiled at most")
    p.add_argument("--kernel-regex", help="profile only kernels whose name matches")
    p.add_argument("--timeout-s", type=float, default=400)
    p.add_argument("--keep-report", action="store_true", help="keep the .ncu-rep file in --out-dir")
    p.add_argument("target", nargs="*", help="CLI arguments (after --) replacing the default shape")
    args = p.parse_args()

    ctx = context.base_context("profile", args.commit)
    ctx.update(context.nvidia_smi())
    name = args.name or "profile_" + context.run_name(ctx)
    target_args = args.target or list(DEFAULT_TARGET)
    if args.backward and "--backward" not in target_args:
        target_args.append("--backward")
    data = {"name": name, "context": ctx, "target": [args.cli] + target_args}
    tool = ncu.find_ncu(args.ncu)
    if tool is None:
        data["error"] = "ncu not found (PATH, /usr/local/cuda*/bin, /opt/nvidia/nsight-compute)"
    elif not os.path.isfile(args.cli):
        data["error"] = f"CLI not found at {args.cli}"
    else:
        data["ncu_version"] = ncu.version(tool)
        os.makedirs(args.out_dir, exist_ok=True)
        data.update(ncu.profile(tool, data["target"], args.launch_count, args.kernel_regex, args.timeout_s,
                                args.out_dir if args.keep_report else None))
    os.makedirs(args.out_dir, exist_ok=True)
    json_path = os.path.join(args.out_dir, f"{name}.json")
    md_path = os.path.join(args.out_dir, f"{name}.md")
    results.write(data, json_path)
    text = ncu.markdown(data)
    with open(md_path, "w", encoding="utf-8") as f:
        f.write(text)
    print(text)
    print(f"profile: {json_path}, {md_path}")
    return 1 if data.get("error") else 0


if __name__ == "__main__":
    sys.exit(main())
