"""The one FLOP count every TFLOP/s in the benchmark comes from (FlashAttention's convention)."""

PASS_FACTOR = {"fwd": 1.0, "bwd": 2.5, "fwd_bwd": 3.5}


def attention_flops(batch, heads, seqlen_q, seqlen_k, head_dim, causal, pass_="fwd"):
    """Forward is two matmuls, 2 * (2 * Sq * Sk * D) per (batch, head); causal does half the work
    (exactly half only for Sq == Sk, the convention FlashAttention's benchmarks use). Backward is
    five matmuls, 2.5x forward; forward + backward 3.5x."""
    forward = 4.0 * batch * heads * seqlen_q * seqlen_k * head_dim
    if causal:
        forward /= 2.0
    return forward * PASS_FACTOR[pass_]


def tflops(flops, ms):
    if ms is None or ms <= 0:
        return None
    return flops / (ms * 1e-3) / 1e12
