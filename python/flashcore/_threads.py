"""CPU calls on PyTorch's own OpenMP threads.

PyTorch runs its CPU ops on an OpenMP team (ATen's parallel backend), whose threads by OpenMP's
default wait policy spin for a while after each op. On flashcore's own thread pool, a CPU call that
follows a torch op found a core taken by such a thread and ran up to 1.2x slower
(docs/tuning/cpu.md). So on import the binding tells the library to run its CPU work on PyTorch's
OpenMP runtime (flashcore_cpu_use_openmp): the spinning threads pick up flashcore's work, and a call
never has more runnable threads than torch.get_num_threads(), which it passes as its thread count.

FLASHCORE_CPU_THREADS=pool keeps flashcore's own pool; so does a PyTorch whose parallel backend is
not OpenMP, or an OpenMP runtime this module cannot find.
"""

import os

import torch

from flashcore import _library as lib
from flashcore._library import ArgumentError

_RUNTIME_NAMES = ("libgomp", "libiomp", "libomp")


def torch_openmp_runtime():
    """The path of the OpenMP runtime PyTorch's CPU ops run on, or None: the one loaded from
    PyTorch's own lib folder, else the only one loaded in the process (Linux: /proc/self/maps)."""
    if "ATen parallel backend: OpenMP" not in torch.__config__.parallel_info():
        return None
    try:
        with open("/proc/self/maps") as maps:
            loaded = {line.split(None, 5)[5].strip() for line in maps if len(line.split(None, 5)) == 6}
    except OSError:
        return None
    runtimes = sorted(p for p in loaded if os.path.basename(p).startswith(_RUNTIME_NAMES) and ".so" in p)
    torch_lib = os.path.realpath(os.path.join(os.path.dirname(torch.__file__), "lib"))
    own = [p for p in runtimes if os.path.dirname(os.path.realpath(p)) == torch_lib]
    if own:
        return own[0]
    return runtimes[0] if len(runtimes) == 1 else None


def use_threads(which):
    """'torch': run flashcore's CPU work on PyTorch's OpenMP threads (the default where possible);
    'pool': on flashcore's own pool. Returns the choice in effect."""
    if which not in ("torch", "pool"):
        raise ArgumentError(f"flashcore: threads must be 'torch' or 'pool', got {which!r}")
    if lib.cpu_use_openmp is None:
        return "pool"
    runtime = torch_openmp_runtime() if which == "torch" else None
    if which == "torch" and runtime is None:
        return "pool"
    lib.check(lib.cpu_use_openmp(runtime.encode() if runtime else None))
    return which


CPU_THREADS = use_threads("pool" if os.environ.get("FLASHCORE_CPU_THREADS") == "pool" else "torch")
