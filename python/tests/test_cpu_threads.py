"""CPU calls run on PyTorch's OpenMP threads (flashcore._threads) and give exactly what flashcore's
own pool gives, with no thread of flashcore's own started."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import flashcore
from flashcore import _threads, flash_attn_func

OPENMP = "ATen parallel backend: OpenMP" in torch.__config__.parallel_info()


def _run(q, k, v, dout):
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = flash_attn_func(*leaves, causal=True)
    out.backward(dout)
    return [out.detach()] + [t.grad for t in leaves]


@pytest.mark.skipif(not OPENMP or not os.path.exists("/proc/self/maps"),
                    reason="PyTorch's parallel backend is not OpenMP, or no /proc/self/maps (not Linux)")
def test_cpu_calls_run_on_torch_openmp_threads():
    assert flashcore.cpu_threads == "torch" or os.environ.get("FLASHCORE_CPU_THREADS") == "pool"
    assert _threads.torch_openmp_runtime() is not None
    q, k, v, dout = (torch.randn(2, 300, 4, 64, dtype=torch.bfloat16) for _ in range(4))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        assert _threads.use_threads("pool") == "pool"
        on_pool = _run(q, k, v, dout)
        assert _threads.use_threads("torch") == "torch"
        on_torch = _run(q, k, v, dout)
        on_torch_again = _run(q, k, v, dout)
    finally:
        torch.set_num_threads(threads)
        _threads.use_threads(flashcore.cpu_threads)
    for a, b, c in zip(on_pool, on_torch, on_torch_again):
        assert torch.equal(a, b) and torch.equal(a, c)


@pytest.mark.skipif(not OPENMP or not os.path.exists("/proc/self/task"),
                    reason="PyTorch's parallel backend is not OpenMP, or no /proc/self/task (not Linux)")
def test_a_fresh_process_starts_no_thread_of_its_own():
    """After a torch op has started PyTorch's team of 3, flashcore's calls add no thread (its own
    pool would add 2)."""
    script = textwrap.dedent("""
        import os, torch, flashcore
        torch.set_num_threads(3)
        torch.randn(512, 512) @ torch.randn(512, 512)
        before = len(os.listdir("/proc/self/task"))
        q, k, v, dout = (torch.randn(1, 600, 4, 64, requires_grad=True) for _ in range(4))
        flashcore.flash_attn_func(q, k, v, causal=True).backward(dout)
        print(flashcore.cpu_threads, len(os.listdir("/proc/self/task")) - before)
    """)
    env = dict(os.environ)
    env.pop("FLASHCORE_CPU_THREADS", None)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert result.stdout.split() == ["torch", "0"], result.stdout + result.stderr


def test_use_threads_rejects_an_unknown_choice():
    with pytest.raises(ValueError, match="'torch' or 'pool'"):
        _threads.use_threads("openmp")
