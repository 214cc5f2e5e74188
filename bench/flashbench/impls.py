"""How each implementation is called, and the three timed passes built from a forward call.

Layouts: flashcore takes (batch, seqlen, heads, head_dim), as flash_attn does. SDPA takes
(batch, heads, seqlen, head_dim): by default it gets its own contiguous copy of the same values in
that layout (what the anchors measured); with --sdpa-layout bshd it gets .transpose(1, 2) views of
flashcore's tensors, as a flash_attn user switching to SDPA would pass them.
"""
import contextlib
import warnings

from .plan import FLASHCORE_IMPLS, SDPA_BACKENDS

TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def load_flashcore():
    """(flash_attn_func, None, module path) or (None, why not, None)."""
    try:
        import flashcore
        func = flashcore.flash_attn_func
    except Exception as e:  # any failure here is a blank flashcore column, not a crash
        return None, f"import flashcore failed: {type(e).__name__}: {first_line(e)}", None
    return func, None, getattr(flashcore, "__file__", None)


def first_line(error, limit=300):
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:limit]


class ShapeInputs:
    """Fresh random q, k, v and an output gradient for one shape, in both layouts. Seeded by the
    shape so every implementation sees the same values."""

    def __init__(self, torch, cell, sdpa_layout, seed):
        dtype = getattr(torch, TORCH_DTYPES[cell.dtype])
        gen = torch.Generator(device="cuda")
        gen.manual_seed(seed)

        def randn(seqlen, heads):
            return torch.randn(cell.batch, seqlen, heads, cell.head_dim, device="cuda", dtype=dtype,
                               generator=gen)

        self.gqa = cell.gqa
        self.q = randn(cell.seqlen_q, cell.heads)
        self.k, self.v = randn(cell.seqlen_k, cell.kv_heads), randn(cell.seqlen_k, cell.kv_heads)
        self.dout = randn(cell.seqlen_q, cell.heads)
        for t in (self.q, self.k, self.v):
            t.requires_grad_(True)
        if sdpa_layout == "bhsd":
            self.sdpa_q, self.sdpa_k, self.sdpa_v = (
                t.detach().transpose(1, 2).contiguous().requires_grad_(True) for t in (self.q, self.k, self.v))
            self.sdpa_dout = self.dout.transpose(1, 2).contiguous()
            self.sdpa_grad_inputs = (self.sdpa_q, self.sdpa_k, self.sdpa_v)
        else:
            self.sdpa_q, self.sdpa_k, self.sdpa_v = (t.transpose(1, 2) for t in (self.q, self.k, self.v))
            self.sdpa_dout = self.dout.transpose(1, 2)
            self.sdpa_grad_inputs = (self.q, self.k, self.v)


def standard_attention(torch, q, k, v, causal=False):
    """Attention as written in plain PyTorch, (B, H, S, D): S = QK^T and P = softmax(S) are
    materialised in full, which is what the memory comparison is about."""
    scores = torch.matmul(q, k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    if causal:
        sq, sk = scores.shape[-2], scores.shape[-1]
        mask = torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril(sk - sq)
        scores = scores.masked_fill(~mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return torch.matmul(probs, v)


def repeat_kv(t, groups):
    """(B, Hkv, S, D) -> (B, Hkv * groups, S, D): each K/V head repeated for its query heads, in
    flash_attn's GQA order (query head h reads K/V head h // groups)."""
    return t.repeat_interleave(groups, dim=1)


def _sdpa_gqa_refusal(torch, sdpa, q, k, v, causal):
    """None when SDPA (under the active backend restriction) runs GQA natively with enable_gqa=True,
    else why not (torch < 2.5 has no enable_gqa; some backends refuse it)."""
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sdpa(q, k, v, is_causal=causal, enable_gqa=True)
        return None
    except Exception as e:  # the refusal is the answer
        return f"{type(e).__name__}: {first_line(e, 160)}"


def forward_call(torch, impl, inputs, causal, flash_attn_func, notes=None):
    """(forward() -> out, the tensors gradients are taken for, the output gradient). For GQA cells
    SDPA gets enable_gqa=True where its backend accepts it, else K/V repeated to every query head
    (a copy made once, untimed); `notes` (a dict) gets which: gqa_via and a note."""
    notes = {} if notes is None else notes
    if impl in FLASHCORE_IMPLS:
        q, k, v = inputs.q, inputs.k, inputs.v
        kwargs = {"deterministic": True} if impl == "flashcore_det" else {}

        def forward():
            out = flash_attn_func(q, k, v, causal=causal, **kwargs)
            return out[0] if isinstance(out, (tuple, list)) else out
        return forward, (q, k, v), inputs.dout
    q, k, v = inputs.sdpa_q, inputs.sdpa_k, inputs.sdpa_v
    if impl == "standard":
        return (lambda: standard_attention(torch, q, k, v, causal)), inputs.sdpa_grad_inputs, inputs.sdpa_dout
    if impl in SDPA_BACKENDS:
        sdpa = torch.nn.functional.scaled_dot_product_attention
        if getattr(inputs, "gqa", False):
            refusal = _sdpa_gqa_refusal(torch, sdpa, q, k, v, causal)
            if refusal is None:
                notes["gqa_via"] = "enable_gqa"
                notes["note"] = "GQA: SDPA called with enable_gqa=True"
                return ((lambda: sdpa(q, k, v, is_causal=causal, enable_gqa=True)), inputs.sdpa_grad_inputs,
                        inputs.sdpa_dout)
            groups = q.shape[1] // k.shape[1]
            kr, vr = (repeat_kv(t.detach(), groups).requires_grad_(True) for t in (k, v))
            notes["gqa_via"] = "repeat_kv"
            notes["note"] = (f"GQA: enable_gqa refused ({refusal}); K/V repeated to {q.shape[1]} heads before "
                             f"the timed calls (the copy is not timed; gradients are the repeated K/V's)")
            return (lambda: sdpa(q, kr, vr, is_causal=causal)), (inputs.sdpa_grad_inputs[0], kr, vr), inputs.sdpa_dout
        return (lambda: sdpa(q, k, v, is_causal=causal)), inputs.sdpa_grad_inputs, inputs.sdpa_dout
    raise ValueError(f"unknown implementation {impl!r}")


def backend_context(torch, impl):
    """SDPA restricted to one backend; nothing for the others. Kept active through timing, so the
    backward's kernel is the backend's own."""
    if impl not in SDPA_BACKENDS:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel(getattr(SDPBackend, SDPA_BACKENDS[impl]))


def pass_call(torch, pass_, forward, grad_inputs, dout):
    """The timed callable. fwd: inference (no autograd graph). bwd: backward alone, from one forward
    run here, untimed, whose graph is kept (retain_graph). fwd_bwd: both."""
    if pass_ == "fwd":
        def run():
            with torch.no_grad():
                forward()
        return run
    if pass_ == "bwd":
        out = forward()

        def run():
            torch.autograd.grad(out, grad_inputs, dout, retain_graph=True)
        return run
    if pass_ == "fwd_bwd":
        def run():
            torch.autograd.grad(forward(), grad_inputs, dout)
        return run
    raise ValueError(f"unknown pass {pass_!r}")


@contextlib.contextmanager
def captured_warnings():
    """Collects warnings (SDPA explains why a backend refused in a UserWarning)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def explain(error, caught_warnings):
    """One reason string: the exception's first line, plus SDPA's distinct warnings."""
    reason = f"{type(error).__name__}: {first_line(error)}"
    notes = []
    for w in caught_warnings:
        msg = first_line(w.message, 200)
        if msg not in notes:
            notes.append(msg)
    if notes:
        reason += " | " + " | ".join(notes[:4])
    return reason[:800]
