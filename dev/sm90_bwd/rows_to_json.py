"""Turns bench.py's JSON rows ($OUT/bench_rows.jsonl) into bench/results' row format (run context
+ rows {impl, kernels, pass, dtype, head_dim, causal, batch, heads, heads_kv, seqlen_q, seqlen_k,
ms, tflops, reason}). impl: flashcore / flashcore_det (the harness's library path, or a dev
variant when kernels names one: "sm90_variant7", "sm90_variant7_split4", ...), sdpa_cudnn.
Usage: python3 rows_to_json.py bench_rows.jsonl out.json key=value ... (run context)."""
import json
import sys


def main():
    src, dst = sys.argv[1], sys.argv[2]
    context = dict(kv.split("=", 1) for kv in sys.argv[3:])
    rows = []
    for line in open(src):
        r = json.loads(line)
        name = r["name"]
        det = name == "deterministic" or name.endswith("-det")
        if name == "cudnn":
            impl, kernels = "sdpa_cudnn", "cudnn"
        else:
            impl = "flashcore_det" if det else "flashcore"
            kernels = "sm90" if r["variant"] in (-1, None) else f"sm90_variant{r['variant']}"
            if r.get("splits"):
                kernels += f"_split{r['splits']}"
        rows.append({"impl": impl, "kernels": kernels, "pass": "bwd",
                     "dtype": {"bfloat16": "bf16", "float16": "fp16"}[r["dtype"]], "head_dim": r["d"],
                     "causal": r["causal"], "batch": r["b"], "heads": r["hq"], "heads_kv": r["hkv"],
                     "seqlen_q": r["s"], "seqlen_k": r["s"], "ms": r["ms"], "tflops": r["tflops"],
                     "reason": "dev harness bench.py (CUDA events, warm L2, same process as sdpa_cudnn)"})
    json.dump(dict(context=context, rows=rows), open(dst, "w"), indent=1)
    print(f"{len(rows)} rows -> {dst}")


if __name__ == "__main__":
    main()
