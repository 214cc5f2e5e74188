"""flashcore's kernel families in the benchmark: which family a flashcore impl forces, and which
family each flashcore row ran.

flashcore has two GPU kernel families, `sm80` (mma.sync, any GPU >= 8.0) and `sm90` (TMA and wgmma,
H100/H200). With the API's `kernels` field at auto (what flash_attn_func passes) the library reads
the environment variable FLASHCORE_KERNELS (auto|sm80|sm90) at every call. The impls
`flashcore_sm80` and `flashcore_sm90` set it for the duration of their cell only (`forced`), and
`flashcore` sets it to auto, so nothing leaks from one impl into another, nor from the caller's
environment into the auto rows. A forced family that cannot serve a call raises
NotImplementedError, which the worker records as the cell's reason.

The family a call runs is asked of the library (flashcore_selected_kernels in the C ABI), under the
same environment, without running anything: the row's `kernels` is e.g. "sm90" for a forward,
"sm80" for a backward, "sm90+sm80" (forward+backward) for fwd_bwd.
"""
import contextlib
import ctypes
import os

from .plan import FLASHCORE_IMPLS

ENV = "FLASHCORE_KERNELS"
FORCED = {"flashcore": "auto", "flashcore_sm80": "sm80", "flashcore_sm90": "sm90", "flashcore_det": "auto"}
assert set(FORCED) == set(FLASHCORE_IMPLS)


def is_flashcore(impl):
    return impl in FORCED


@contextlib.contextmanager
def forced(impl):
    """FLASHCORE_KERNELS set to the impl's family inside the block, restored (or removed) after it.
    Nothing for impls that are not flashcore's."""
    family = FORCED.get(impl)
    if family is None:
        yield
        return
    before = os.environ.get(ENV)
    os.environ[ENV] = family
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = before


def label(pass_, forward=None, backward=None):
    """The row's `kernels` string from the families of the passes it times, or None when one of them
    is unknown."""
    if pass_ == "fwd":
        return forward
    if pass_ == "bwd":
        return backward
    if pass_ == "fwd_bwd":
        return f"{forward}+{backward}" if forward and backward else None
    raise ValueError(f"unknown pass {pass_!r}")


class Selector:
    """Asks the flashcore library which family a call would run (nothing runs). `ask` returns
    (family name, None) or (None, why not); a library without flashcore_selected_kernels answers
    (None, reason) every time."""

    def __init__(self):
        try:
            from flashcore import _library as lib
            from flashcore._tensors import pack
            self._lib, self._pack = lib, pack
            self._fn = lib.selected_kernels
            self.missing = None
        except Exception as e:  # an older library: rows keep kernels null, with this note
            self._lib = self._pack = self._fn = None
            self.missing = f"flashcore_selected_kernels unavailable: {type(e).__name__}: {e}"

    def ask(self, torch, q, k, v, causal, backward):
        if self._fn is None:
            return None, self.missing
        lib = self._lib
        batch, seqlen_q, heads, _ = q.shape
        out = torch.empty_like(q)
        lse = torch.empty((batch, heads, seqlen_q), dtype=torch.float32, device=q.device)
        if backward:
            tensors = (q, k, v, out, torch.empty_like(q), lse, torch.empty_like(q), torch.empty_like(k),
                       torch.empty_like(v))
        else:
            tensors = (q, k, v, out, None, lse, None, None, None)
        keep, views = self._pack(*tensors)
        options = lib.options(None, bool(causal))
        family = ctypes.c_int32(-1)
        status = self._fn(*views, int(bool(backward)), ctypes.byref(options), ctypes.byref(family))
        del keep
        if status:
            return None, f"selected_kernels: status {status}: {lib.last_error()}"
        return lib.KERNEL_FAMILY_NAMES.get(family.value, f"family {family.value}"), None

    def row_fields(self, torch, pass_, q, k, v, causal):
        """{'kernels': label} plus 'kernels_note' when a family could not be named. Call inside
        `forced(impl)`, so the answer is the family the timed calls will run."""
        forward = backward = None
        notes = []
        if pass_ in ("fwd", "fwd_bwd"):
            forward, note = self.ask(torch, q, k, v, causal, False)
            notes += [note] if note else []
        if pass_ in ("bwd", "fwd_bwd"):
            backward, note = self.ask(torch, q, k, v, causal, True)
            notes += [note] if note else []
        fields = {"kernels": label(pass_, forward, backward)}
        if notes:
            fields["kernels_note"] = "; ".join(dict.fromkeys(notes))[:400]
        return fields
