"""The run's append-only record (JSON lines), shared by the worker and the supervisor.

The worker appends a `start` record before each cell and a `row` record after it, flushing each
line, so whatever kills the worker (a sticky CUDA error, a segfault, a hang, the device's time
limit) leaves a record of every finished cell and names the one in flight. Record kinds:
  context  {context}            the worker's view of the machine (one per worker start)
  start    {key}                a cell began
  row      {key, row}           a cell finished (row["reason"] says why when it has no time)
  fatal    {key, reason}        the worker is exiting because the GPU context is unusable
  disable  {scope, reason}      cells matching scope (impl, suite, and maybe dtype, head_dim) are skipped
  end      {smi}                the worker finished every cell (nvidia-smi's clocks at the end)
"""
import json
import os
import threading


class Journal:
    def __init__(self, path):
        self.path = path
        self._lock = threading.Lock()
        self._file = open(path, "a", encoding="utf-8")

    def write(self, kind, **fields):
        line = json.dumps({"kind": kind, **fields}, default=str)
        with self._lock:
            self._file.write(line + "\n")
            # flush (not fsync): the OS keeps the line when the process dies, which is the case here.
            self._file.flush()

    def close(self):
        self._file.close()


def read(path):
    """All complete records; a line cut short by a kill is dropped."""
    records = []
    if not os.path.exists(path):
        return records
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


class State:
    """What a journal says so far: rows by key, the cell in flight, disabled scopes, contexts."""

    def __init__(self, records):
        self.rows = {}
        self.contexts = []
        self.disabled = []
        self.fatal = None
        self.end = None
        in_flight = None
        for r in records:
            kind = r.get("kind")
            if kind == "row":
                self.rows[r["key"]] = r["row"]
                if in_flight == r["key"]:
                    in_flight = None
            elif kind == "start":
                in_flight = r["key"]
            elif kind == "context":
                self.contexts.append(r["context"])
            elif kind == "disable":
                self.disabled.append((r["scope"], r["reason"]))
            elif kind == "fatal":
                self.fatal = r
            elif kind == "end":
                self.end = r
        self.in_flight = in_flight

    def disabled_reason(self, cell):
        for scope, reason in self.disabled:
            if all(getattr(cell, "pass_" if k == "pass" else k) == v for k, v in scope.items()):
                return reason
        return None
