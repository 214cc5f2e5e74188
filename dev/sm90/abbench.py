"""A/B in one process: builds of the sm90 forward (.so files beside this script) and SDPA's cuDNN
backend, cell by cell (16k tokens, H*D = 2048), each build timed twice (A B ... cuDNN ... B A) so
the spread between a build's two readings shows the noise. Then the 1x8x512x64 fp16 latency
(eager / queued / CUDA graph) of A, B and cuDNN.
FC_LIB_A, FC_LIB_B: the two builds. EXTRA: "name=lib.so@variant@d:causal,..." more builds run
as a dev variant (kernel_dim 1000 + variant) on the cells listed (d:causal).
CELLS: "dtype:d:causal:seqs;..." (default below). Writes $OUT/$BENCH_NAME (default abbench.json)."""
import ctypes
import json
import os
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F

import bench
import fc_sm90

HERE = os.path.dirname(os.path.abspath(__file__))
LIBS = {}
for key in ("A", "B"):
    name = os.environ.get(f"FC_LIB_{key}", dict(A="libfc_sm90_base.so", B="libfc_sm90.so")[key])
    lib = ctypes.CDLL(os.path.join(HERE, name))
    lib.fc_sm90_fwd.restype = fc_sm90._LIB.fc_sm90_fwd.restype
    lib.fc_sm90_fwd.argtypes = fc_sm90._LIB.fc_sm90_fwd.argtypes
    LIBS[key] = lib
EXTRA = {}  # name -> (variant, {(d, causal)})
for spec in filter(None, os.environ.get("EXTRA", "").split(";")):
    name, rest = spec.split("=")
    libname, variant, cells = rest.split("@")
    lib = ctypes.CDLL(os.path.join(HERE, libname))
    lib.fc_sm90_fwd.restype = fc_sm90._LIB.fc_sm90_fwd.restype
    lib.fc_sm90_fwd.argtypes = fc_sm90._LIB.fc_sm90_fwd.argtypes
    LIBS[name] = lib
    EXTRA[name] = (int(variant), {(int(c.split(":")[0]), c.split(":")[1] == "1") for c in cells.split(",")})

DEFAULT_CELLS = ("bf16:64:1:1024,2048,4096,8192,16384;bf16:64:0:2048,4096,16384;"
                 "bf16:128:0:1024,2048,4096,8192;bf16:128:1:2048,4096;"
                 "bf16:256:0:1024,2048,4096,8192,16384;bf16:256:1:1024,2048,4096,8192;"
                 "fp16:64:1:1024,2048,4096,8192;fp16:128:0:2048,4096;fp16:256:0:2048,4096,8192;fp16:256:1:2048,4096")


ROUNDS = int(os.environ.get("ROUNDS", "1"))  # (A B extras cuDNN extras B A) this many times
ITERS = int(os.environ.get("ITERS", "10"))    # calls between two events
REPS = int(os.environ.get("REPS", "5"))       # event pairs; time_ms takes their median


def with_lib(key, fn):
    variant = EXTRA[key][0] if key in EXTRA else -1

    def run():
        fc_sm90._LIB = LIBS[key]
        fc_sm90.VARIANT = variant
        return fn()
    return run


def main():
    rows = []
    dt = dict(bf16=torch.bfloat16, fp16=torch.float16)
    # Clocks up before the first cell (an idle H100 reads 345-450 MHz): 2 s of matrix products.
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    end = torch.cuda.Event(enable_timing=True)
    start = torch.cuda.Event(enable_timing=True)
    start.record()
    while True:
        for _ in range(20):
            x @ x
        end.record()
        end.synchronize()
        if start.elapsed_time(end) > 2000:
            break
    del x
    for spec in os.environ.get("CELLS", DEFAULT_CELLS).split(";"):
        dname, d, causal, seqs = spec.split(":")
        d, causal = int(d), causal == "1"
        for s in (int(x) for x in seqs.split(",")):
            b, h = 16384 // s, 2048 // d
            q = torch.randn(b, s, h, d, device="cuda", dtype=dt[dname])
            k, v = torch.randn_like(q), torch.randn_like(q)
            out = torch.empty_like(q)
            lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
            f = bench.flops(b, h, s, s, d, causal)
            call = lambda: fc_sm90.forward(q, k, v, causal, out=out, lse=lse)  # noqa: E731
            qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
            cudnn = lambda: bench._sdpa(SDPBackend.CUDNN_ATTENTION, qt, kt, vt, causal)  # noqa: E731
            # Extras stop at 8k keys: past that a d64 causal variant runs the very kernel B runs, and
            # the two libraries share its smem opt-in flag (a function-local static of one template
            # instantiation is unified across dlopen'ed libraries), so the variant would launch
            # without its opt-in.
            extra = [n for n, (_, where) in EXTRA.items() if (d, causal) in where and s <= 8192]
            order = ["A", "B"] + extra
            t = {key: [] for key in order + ["cudnn"]}
            for _ in range(ROUNDS):
                for key in order + ["cudnn"] + order[::-1]:
                    fn = cudnn if key == "cudnn" else with_lib(key, call)
                    t[key].append(f / bench.time_ms(fn, iters=ITERS, reps=REPS) / 1e9)
            row = dict(dtype=dname, d=d, causal=causal, seqlen=s, batch=b, heads=h, cudnn=t["cudnn"],
                       **{key: t[key] for key in order})
            rows.append(row)
            med = {key: sorted(v)[len(v) // 2] for key, v in t.items()}  # median reading of each
            c = med["cudnn"]
            line = " ".join(f"{key} {med[key]:6.1f} [{min(t[key]):.0f}-{max(t[key]):.0f}] ({med[key] / c:.3f})" for key in order)
            print(f"{dname} d{d} {'causal' if causal else 'full  '} S{s:6d}: {line}  cudnn {c:6.1f} [{min(t['cudnn']):.0f}-"
                  f"{max(t['cudnn']):.0f}]  B/A {med['B'] / med['A']:.3f}", flush=True)
            del q, k, v, out, lse
    lat = {}
    if os.environ.get("LATENCY", "1") == "1":
        q = torch.randn(1, 512, 8, 64, device="cuda", dtype=torch.float16)
        k, v = torch.randn_like(q), torch.randn_like(q)
        out = torch.empty_like(q)
        qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
        fns = {"A": with_lib("A", lambda: fc_sm90.forward(q, k, v, False, out=out)),
               "B": with_lib("B", lambda: fc_sm90.forward(q, k, v, False, out=out)),
               "cudnn": lambda: bench._sdpa(SDPBackend.CUDNN_ATTENTION, qt, kt, vt)}
        for rep in range(2):
            for name, fn in fns.items():
                r = dict(eager=bench.latency_us(fn), queued_us=bench.time_ms(fn, iters=50) * 1e3)
                try:
                    r["graph"] = bench.graph_latency_us(fn, iters=100)
                except Exception as e:  # noqa: BLE001
                    r["graph"] = repr(e)
                lat.setdefault(name, []).append(r)
                g = r["graph"]
                print(f"latency 1x8x512x64 fp16 {name} rep{rep}: eager p50 {r['eager']['p50']:.1f}  queued {r['queued_us']:.1f}  "
                      f"graph p50 {g['p50'] if isinstance(g, dict) else g}  p90 {g['p90'] if isinstance(g, dict) else ''}", flush=True)
    o = os.environ.get("OUT")
    if o:
        with open(os.path.join(o, os.environ.get("BENCH_NAME", "abbench.json")), "w") as fh:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                           libs={k: os.environ.get(f"FC_LIB_{k}") for k in ("A", "B")}, extra=os.environ.get("EXTRA"),
                           rows=rows, latency_us=lat), fh)


if __name__ == "__main__":
    sys.exit(main())
