"""An independent attention reference and FlashAttention's accuracy rule.

The reference shares no code with flashcore: plain PyTorch, the causal mask aligned to the
bottom-right corner of the score matrix (query i sees key j iff j <= i + seqlen_k - seqlen_q), GQA
by repeating each kv head for its group of query heads, and rows that see no key giving 0.

The rule: against the float64 reference, flashcore's max error must be at most `factor` times the
max error of a plain implementation in the same precision (matmuls in fp16/bf16 on inputs rounded
to it, softmax in fp32, results rounded to the dtype), plus a noise floor of 2 ulp of the output
dtype at the output's magnitude. factor is 2 for the forward and 3 for gradients.
"""

import math

import torch

FORWARD_FACTOR = 2.0
GRADIENT_FACTOR = 3.0


def bottom_right_causal_mask(seqlen_q, seqlen_k, device):
    """True where query i may NOT see key j."""
    row = torch.arange(seqlen_q, device=device).view(-1, 1)
    col = torch.arange(seqlen_k, device=device).view(1, -1)
    return col > row + (seqlen_k - seqlen_q)


def local_mask(seqlen_q, seqlen_k, window_size, device):
    """True where query i may NOT see key j under window_size (left, right), -1 = unbounded,
    bottom-right aligned as flash_attn's construct_local_mask."""
    left, right = window_size
    row = torch.arange(seqlen_q, device=device).view(-1, 1)
    col = torch.arange(seqlen_k, device=device).view(1, -1)
    diagonal = row + (seqlen_k - seqlen_q)
    masked = torch.zeros(seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    if right >= 0:
        masked |= col > diagonal + right
    if left >= 0:
        masked |= col < diagonal - left
    return masked


def alibi_bias(slopes, batch, nheads, seqlen_q, seqlen_k, device):
    """(batch, nheads, seqlen_q, seqlen_k): -slope * |i + seqlen_k - seqlen_q - j| (flash_attn's
    non-causal definition, used for causal too: it differs by a per-row constant there)."""
    slopes = slopes.double().reshape(-1, nheads).expand(batch, nheads).reshape(batch, nheads, 1, 1)
    row = torch.arange(seqlen_q, device=device).view(-1, 1)
    col = torch.arange(seqlen_k, device=device).view(1, -1)
    return -slopes * (row + seqlen_k - seqlen_q - col).abs().double()


def attention(q, k, v, causal=False, softmax_scale=None, upcast=True, window_size=(-1, -1), softcap=0.0,
              alibi_slopes=None, dropout_mask=None, dropout_p=0.0):
    """out (batch, seqlen_q, nheads, headdim) and lse (batch, nheads, seqlen_q).

    dropout_mask (bool, (batch, nheads, seqlen_q, seqlen_k)): the probabilities kept; kept ones are
    scaled by 1 / (1 - dropout_p) after the softmax (the LSE is the softmax's).

    upcast=True: everything in float64 (the oracle). upcast=False: the plain same-precision
    implementation the accuracy rule compares against."""
    dtype = q.dtype
    if softmax_scale is None:
        softmax_scale = q.shape[-1] ** (-0.5)
    if upcast:
        q, k, v = q.double(), k.double(), v.double()
    group = q.shape[2] // k.shape[2]
    k = k.repeat_interleave(group, dim=2)
    v = v.repeat_interleave(group, dim=2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k)
    if not upcast:
        scores = scores.float()
    scores = scores * softmax_scale
    if softcap > 0:
        scores = torch.tanh(scores / softcap) * softcap
    if alibi_slopes is not None:
        bias = alibi_bias(alibi_slopes, q.shape[0], q.shape[2], q.shape[1], k.shape[1], q.device)
        scores = scores + bias.to(scores.dtype)
    blind_rows = None
    if causal or tuple(window_size) != (-1, -1):
        masked = local_mask(q.shape[1], k.shape[1], (window_size[0], 0 if causal else window_size[1]), q.device)
        scores = scores.masked_fill(masked, float("-inf"))
        blind_rows = masked.all(dim=-1, keepdim=True)
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.softmax(scores, dim=-1)
    if blind_rows is not None:
        probs = probs.masked_fill(blind_rows, 0.0)
    if dropout_mask is not None:
        probs = probs.masked_fill(~dropout_mask, 0.0) / (1.0 - dropout_p)
    out = torch.einsum("bhqk,bkhd->bqhd", probs.to(v.dtype), v)
    return (out if upcast else out.to(dtype)), lse


def noise_floor(reference, dtype):
    """2 ulp of `dtype` at the magnitude of the reference's largest element."""
    magnitude = reference.abs().max().item()
    if magnitude == 0.0:
        return 0.0
    ulp = math.ldexp(torch.finfo(dtype).eps, math.frexp(magnitude)[1] - 1)
    return 2.0 * ulp


def assert_accurate(name, actual, reference, plain, factor):
    """FlashAttention's rule; NaN or inf never passes."""
    assert actual.shape == reference.shape, f"{name}: shape {tuple(actual.shape)} != {tuple(reference.shape)}"
    assert torch.isfinite(actual).all(), f"{name}: contains NaN or inf"
    error = (actual.double() - reference).abs().max().item()
    plain_error = (plain.double() - reference).abs().max().item()
    bound = factor * plain_error + noise_floor(reference, actual.dtype)
    assert error <= bound, (f"{name}: max error {error:.3e} exceeds {factor} x plain-implementation error "
                            f"{plain_error:.3e} + noise floor = {bound:.3e}")
