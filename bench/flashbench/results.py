"""The results file: assembled from the journal, read back by the report and the plots."""
import json
import os

from . import journal

SCHEMA = "flashbench/2"  # 2: rows carry kernels, heads_kv and via; GQA and graph rows
METHOD = ("CUDA-event time per call, median over reps (sweep) or p50/p90 over fixed runs (latency); "
          "a 256 MB buffer is written before every timed call (cold L2), and in the latency table a GPU "
          "sleep (hold_us) after it, so the host's work for the call is enqueued before the GPU reaches "
          "it (flush-only p50/p90 and the host wall time per call beside it); warm-up calls first; fresh "
          "torch.randn inputs per shape; fwd = inference forward, bwd = backward alone (retain_graph), "
          "fwd_bwd = both; FLOPs: fwd 4*B*H*Sq*Sk*D (halved when causal), bwd 2.5x, fwd_bwd 3.5x.")


def assemble(cells, state, settings, restarts, stopped_reason=None):
    """One row per planned cell, in plan order; a cell with no journaled row gets the reason the
    run stopped."""
    ctx = dict(state.contexts[0]) if state.contexts else {}
    if state.end:
        ctx["end_smi"] = state.end.get("smi")
    rows, mem = [], []
    for cell in cells:
        row = state.rows.get(cell.key)
        if row is None:
            row = cell.row(reason=f"not run: {stopped_reason or 'the worker stopped before this cell'}")
        (mem if cell.suite == "memory" else rows).append(row)
    return {"schema": SCHEMA, "context": ctx, "settings": settings, "method": METHOD, "restarts": restarts,
            "rows": rows, "memory": mem}


def from_journal(path):
    """A results dict from a journal alone (a run killed before it wrote its JSON)."""
    state = journal.State(journal.read(path))
    rows = [r for r in state.rows.values() if r.get("suite") != "memory"]
    mem = [r for r in state.rows.values() if r.get("suite") == "memory"]
    ctx = dict(state.contexts[0]) if state.contexts else {}
    return {"schema": SCHEMA, "context": ctx, "settings": {}, "method": METHOD, "restarts": [], "rows": rows,
            "memory": mem}


def load(path):
    if path.endswith(".jsonl"):
        return from_journal(path)
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write(data, path):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, default=str)
        f.write("\n")
    os.replace(tmp, path)


def sweep_rows(data):
    return [r for r in data.get("rows", []) if r.get("suite", "sweep") == "sweep"]


def latency_rows(data):
    return [r for r in data.get("rows", []) if r.get("suite") == "latency"]
