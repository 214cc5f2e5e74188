"""Turns bench_ab.py's rows (ab.jsonl) into bench/results' row format (run context + rows {impl,
kernels, pass, dtype, head_dim, causal, batch, heads, heads_kv, seqlen_q, seqlen_k, ms, tflops,
reason}). impl names: flashcore / flashcore_det (this branch; kernels "sm90" or "sm90_splitS" when
the kv split was forced), flashcore_base / flashcore_base_det (the base library of the run),
flashcore_variantN (sections main and d256: dev variant N of this branch's harness; flashcore_base in section main: AB_BASE_LIB, timed in the same rounds), sdpa_cudnn. Usage: python3 ab_to_json.py ab.jsonl out.json key=value ... (run context)."""
import json
import sys


def main():
    src, dst = sys.argv[1], sys.argv[2]
    context = dict(kv.split("=", 1) for kv in sys.argv[3:])
    rows, seen_cudnn = [], set()
    for line in open(src):
        r = json.loads(line)
        if r["section"] in ("prof", "once"):  # no timings
            continue
        base = "base" in r["lib"]
        dtype = {"bfloat16": "bf16", "float16": "fp16"}.get(r.get("dtype", "bf16"), r.get("dtype", "bf16"))
        shape = dict(dtype=dtype, head_dim=r["d"], causal=r["causal"], batch=r["b"], heads=r["hq"],
                     heads_kv=r["hkv"], seqlen_q=r["s"], seqlen_k=r["s"])
        flops = 2.5 * 4 * r["b"] * r["hq"] * r["s"] * r["s"] * r["d"] / (2 if r["causal"] else 1)
        impl = "flashcore" + ("_base" if base else "") + ("_det" if r.get("det") else "")
        if r.get("impl", "flashcore") != "flashcore":  # section main: a dev variant (variants.cu)
            impl += "_" + r["impl"]
        if r["section"] == "l2":  # the causal order's L2 section forced (0: the rule)
            impl += f"_l2section{r['l2_section']}"
        splits = r.get("splits", 0)
        kernels = "sm90" if not splits else f"sm90_split{splits}"
        rows.append(dict(impl=impl, kernels=kernels, pass_="bwd", **shape, ms=flops / r["tflops"] / 1e9,
                         tflops=r["tflops"], reason=f"{r['section']} A/B, lib {r['lib']}"))
        key = (r["lib"], r["section"], dtype, r["d"], r["b"], r["hq"], r["hkv"], r["s"], r["causal"])
        if key not in seen_cudnn:
            seen_cudnn.add(key)
            rows.append(dict(impl="sdpa_cudnn", kernels="cudnn", pass_="bwd", **shape,
                             ms=flops / r["cudnn_tflops"] / 1e9, tflops=r["cudnn_tflops"],
                             reason=f"same process as {r['lib']} ({r.get('cudnn_via', 'mha')})"))
    for row in rows:
        row["pass"] = row.pop("pass_")
    prof = [json.loads(line) for line in open(src) if json.loads(line)["section"] == "prof"]
    json.dump(dict(context=context, rows=rows, kernel_profile=prof), open(dst, "w"), indent=1)
    print(f"{len(rows)} rows, {len(prof)} profiles -> {dst}")


if __name__ == "__main__":
    main()
