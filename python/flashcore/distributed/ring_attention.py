"""Ring attention: exact attention over a sequence split across the ranks of a process group.

Each rank keeps its queries; the keys and values travel round the ring, one rank's block per step,
and each rank computes attention of its queries against the block it holds while the next block is
already on its way (comm.py). Forward: every block gives a partial (out, lse) for the rows it
covers, folded into the running result with flashcore's merge (flashcore/merge.h: float32 math,
exact up to rounding). Backward: the library's backward run per block with the *merged* out and
lse, which is exactly the slice of the whole sequence's gradient that block contributes
(P = exp(s - lse) and D = rowsum(dO * O) are those of the whole row); dQ stays local, summed in
float32, and the dK/dV of each block travel round the ring behind its K/V, each rank adding its
share, until they reach the block's owner.

Precision: partials come out of the kernels in the inputs' dtype. A result built from two of them
is merged straight into that dtype (one rounding, like a single kernel's output); from more, the
running result is kept in float32 and rounded once at the end. Gradients likewise: with two ranks
every sum is of two shares and stays in the dtype; with more, a dK/dV that has one rank's share
travels in the dtype, one with more in float32, the finished one in the dtype, and dQ sums in
float32.
"""

import torch

from flashcore._ops import run_backward, run_forward, run_merge
from flashcore.distributed import layout as layouts


def _blocks(layout, causal, comm, seqlen_q, seqlen_k):
    """The block of each step (None where the rank sees none of the keys held)."""
    return [layouts.block(layout, causal, comm.rank, (comm.rank - step) % comm.world_size, seqlen_q, seqlen_k)
            for step in range(comm.world_size)]


def _rows(t, rows):
    return t[:, rows]


def _lse_rows(lse, rows):
    return lse[:, :, rows]


def ring_forward(q, k, v, softmax_scale, causal, softcap, layout, comm):
    """(out, lse) of q's rows against every rank's keys; out in q's dtype, lse float32."""
    blocks = _blocks(layout, causal, comm, q.shape[1], k.shape[1])
    keep_float32 = sum(b is not None for b in blocks) > 2
    out = lse = None
    kv = (k, v)
    for step, blk in enumerate(blocks):
        pending = comm.exchange(kv) if step + 1 < comm.world_size else None
        if blk is not None:
            part_out, part_lse = run_forward(_rows(q, blk.rows), kv[0][:, blk.cols], kv[1][:, blk.cols],
                                             softmax_scale, blk.causal, softcap=softcap)
            if out is None:  # step 0 covers every row
                out, lse = (part_out.float() if keep_float32 else part_out), part_lse
            else:
                rows_out, rows_lse = _rows(out, blk.rows), _lse_rows(lse, blk.rows)
                run_merge(rows_out, rows_lse, part_out, part_lse, rows_out, rows_lse)
        if pending is not None:
            kv = tuple(pending.wait())
    return out.to(q.dtype), lse


def ring_backward(dout, q, k, v, out, lse, softmax_scale, causal, softcap, deterministic, layout, comm):
    """(dq, dk, dv) for the local shards, given the ring forward's merged out and lse."""
    blocks = _blocks(layout, causal, comm, q.shape[1], k.shape[1])
    if dout.stride(-1) != 1:
        dout = dout.contiguous()
    # A sum of at most two shares is rounded once whether it is kept in the dtype (torch adds 16-bit
    # tensors in float32 and rounds the result) or in float32 and rounded at the end: with two ranks
    # every sum stays in the dtype, saving the float32 passes.
    in_dtype = comm.world_size <= 2
    dq = None
    kv = (k, v)
    dkv = None          # the dK/dV of the block held: this rank's share plus those of the ranks before
    dkv_pending = None  # the previous rank's dK/dV of the block held, in flight
    for step, blk in enumerate(blocks):
        kv_pending = comm.exchange(kv) if step + 1 < comm.world_size else None
        part = None
        if blk is not None:
            part = run_backward(_rows(dout, blk.rows), _rows(q, blk.rows), kv[0][:, blk.cols], kv[1][:, blk.cols],
                                _rows(out, blk.rows), _lse_rows(lse, blk.rows), softmax_scale, blk.causal,
                                deterministic, softcap=softcap)
            if dq is None:  # step 0 covers every row
                dq = part[0] if in_dtype else part[0].float()
            else:
                _rows(dq, blk.rows).add_(part[0])
        if step == 0:
            dkv = [part[1], part[2]]  # one share: exact in the dtype
        else:
            dkv = [t if in_dtype or t.dtype == torch.float32 else t.float() for t in dkv_pending.wait()]
            if part is not None:
                dkv[0][:, blk.cols] += part[1]
                dkv[1][:, blk.cols] += part[2]
        if step + 1 < comm.world_size:
            dkv_pending = comm.exchange(dkv)
        if kv_pending is not None:
            kv = tuple(kv_pending.wait())
    # The dK/dV held now is complete and belongs to the next rank; ours arrives from the previous.
    dk, dv = comm.exchange([t.to(k.dtype) for t in dkv]).wait()
    return dq.to(q.dtype), dk, dv


class RingAttention(torch.autograd.Function):
    """ring_forward / ring_backward under autograd. comm is a comm.RingComm (or LocalComm)."""

    @staticmethod
    def forward(ctx, q, k, v, softmax_scale, causal, softcap, deterministic, layout, comm):
        out, lse = ring_forward(q, k, v, softmax_scale, causal, softcap, layout, comm)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.softmax_scale, ctx.causal, ctx.softcap = softmax_scale, causal, softcap
        ctx.deterministic, ctx.layout, ctx.comm = deterministic, layout, comm
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
            raise RuntimeError("flashcore: ring attention's backward is not itself differentiable: a gradient taken "
                               "with create_graph=True would have no graph; use create_graph=False")
        dq, dk, dv = ring_backward(dout, q, k, v, out, lse, ctx.softmax_scale, ctx.causal, ctx.softcap,
                                   ctx.deterministic, ctx.layout, ctx.comm)
        return dq, dk, dv, None, None, None, None, None, None
