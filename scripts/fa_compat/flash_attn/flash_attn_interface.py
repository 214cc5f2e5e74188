"""flash_attn.flash_attn_interface as its tests import it: the functions, and the two helpers
the tests read (the kernel's key-block size, which only shapes the dropout mask they rebuild, and
the ROCm switch, off)."""

from flashcore import (flash_attn_func, flash_attn_kvpacked_func, flash_attn_qkvpacked_func,
                       flash_attn_varlen_func, flash_attn_varlen_kvpacked_func,
                       flash_attn_varlen_qkvpacked_func, flash_attn_with_kvcache)

USE_TRITON_ROCM = False


def _get_block_size_n(device, head_dim, is_dropout, is_causal):
    """flashcore's S_dmask is rounded to 128 columns (flash_attn's largest block)."""
    return 128

