"""flashcore: exact attention (FlashAttention) for PyTorch, on CUDA GPUs and the CPU.

A drop-in for the flash_attn 2.x package's functions: replace
`from flash_attn import flash_attn_func` with `from flashcore import flash_attn_func`.
The package reaches the C++ library through its C ABI (libflashcore_c, loaded with ctypes), so it
does not depend on PyTorch's C++ ABI and works with any PyTorch >= 2.4.

flashcore.distributed holds context parallelism (ring attention over torch.distributed);
flashcore.merge_partials merges attention computed over separate blocks of keys.
"""

from flashcore import _library, _threads
from flashcore.flash_attn_interface import (flash_attn_func, flash_attn_kvpacked_func, flash_attn_qkvpacked_func,
                                            flash_attn_varlen_func, flash_attn_varlen_kvpacked_func,
                                            flash_attn_varlen_qkvpacked_func)
from flashcore.merge import merge_partials
from flashcore.kvcache import flash_attn_with_kvcache

# What a rejected argument raises: a ValueError and a RuntimeError at once (flash_attn's callers
# catch RuntimeError), its message naming the argument.
ArgumentError = _library.ArgumentError

__version__ = _library.version()
built_with_cuda = _library.built_with_cuda
build_info = _library.build_info
# The GPU kernel families in this build, e.g. ("sm80", "sm90"); () when it is CPU-only (the CPU
# backend then runs CPU tensors and CUDA tensors raise NotImplementedError). `python -m flashcore`
# prints the whole build_info().
kernel_families = _library.kernel_families()
# Where CPU calls run: 'torch' (PyTorch's OpenMP threads) or 'pool' (flashcore's own; set
# FLASHCORE_CPU_THREADS=pool before import to choose it). flashcore._threads says why.
cpu_threads = _threads.CPU_THREADS

__all__ = ["flash_attn_func", "flash_attn_kvpacked_func", "flash_attn_qkvpacked_func", "flash_attn_varlen_func",
           "flash_attn_varlen_kvpacked_func", "flash_attn_varlen_qkvpacked_func", "flash_attn_with_kvcache",
           "merge_partials", "ArgumentError", "built_with_cuda", "build_info", "kernel_families", "__version__"]
