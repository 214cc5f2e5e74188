"""How each implementation is called, and the three timed passes built from a forward call.

Layouts: flashcore takes (batch, seqlen, heads, head_dim), as flash_attn does. SDPA takes
(batch, heads, seqlen, head_dim): by default it gets its own contiguous copy of the same values in
that layout (what the anchors measured); with --sdpa-layout bshd it gets .transpose(1, 2) views of
flashcore's tensors, as a flash_attn user switching to SDPA would pass them.
"""
import contextlib
import warnings

from .plan import SDPA_BACKENDS

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

        def randn(seqlen):
            return torch.randn(cell.batch, seqlen, cell.heads, cell.head_dim, device="cuda", dtype=dtype,
                               generator=gen)

        self.q, self.k, self.v = randn(cell.seqlen_q), randn(cell.seqlen_k), randn(cell.seqlen_k)
        self.dout = randn(cell.seqlen_q)
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


def forward_call(torch, impl, inputs, causal, flash_attn_func):
    """(forward() -> out, the tensors gradients are taken for, the output gradient)."""
    if impl == "flashcore":
        q, k, v = inputs.q, inputs.k, inputs.v

        def forward():
            out = flash_attn_func(q, k, v, causal=causal)
            return out[0] if isinstance(out, (tuple, list)) else out
        return forward, (q, k, v), inputs.dout
    q, k, v = inputs.sdpa_q, inputs.sdpa_k, inputs.sdpa_v
    if impl == "standard":
        return (lambda: standard_attention(torch, q, k, v, causal)), inputs.sdpa_grad_inputs, inputs.sdpa_dout
    if impl in SDPA_BACKENDS:
        sdpa = torch.nn.functional.scaled_dot_product_attention
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
