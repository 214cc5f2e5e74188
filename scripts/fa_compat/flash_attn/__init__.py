"""An import shim that presents flashcore as the flash_attn 2.x package, so flash_attn's own tests
(tests/test_flash_attn.py, fetched at test time, never committed) run against flashcore unchanged:
scripts/fa_compat/run_sample.py puts this folder first on sys.path. Only what those tests import is
here; what flashcore does not have raises NotImplementedError naming it, so a sample's failures
say what is missing. layers/rotary.py's apply_rotary_emb (the tests' reference for the KV cache's
rotary) is plain torch arithmetic."""

from flashcore import (flash_attn_func, flash_attn_kvpacked_func, flash_attn_qkvpacked_func,
                       flash_attn_varlen_func, flash_attn_varlen_kvpacked_func,
                       flash_attn_varlen_qkvpacked_func)
from flash_attn.flash_attn_interface import flash_attn_with_kvcache

__version__ = "2.99.0+flashcore"
