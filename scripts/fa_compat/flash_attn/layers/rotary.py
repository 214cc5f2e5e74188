"""flash_attn.layers.rotary.apply_rotary_emb as flash_attn's KV-cache tests use it: only to build
their reference (the rotated q and new k they compare flashcore's in-kernel rotary against). A plain
torch version of the same arithmetic (in float32, rounded back to x's dtype); cu_seqlens is not
needed by those tests and is refused."""

import torch


def apply_rotary_emb(x, cos, sin, interleaved=False, inplace=False, seqlen_offsets=0, cu_seqlens=None,
                     max_seqlen=None):
    """x: (batch, seqlen, nheads, headdim); cos, sin: (seqlen_ro, rotary_dim / 2); the first
    rotary_dim features of each head rotated by position seqlen_offsets + t (an int, or an int
    tensor (batch,)). Interleaved rotates pairs (0, 1), (2, 3), ...; otherwise the halves
    (i, i + rotary_dim / 2). Positions past seqlen_ro are left unrotated."""
    if cu_seqlens is not None:
        raise NotImplementedError("flash_attn shim: apply_rotary_emb with cu_seqlens")
    batch, seqlen, _, headdim = x.shape
    half = cos.shape[-1]
    rotary_dim = 2 * half
    if rotary_dim > headdim:
        raise ValueError(f"apply_rotary_emb: rotary_dim {rotary_dim} > headdim {headdim}")
    positions = torch.arange(seqlen, device=x.device).unsqueeze(0)
    if isinstance(seqlen_offsets, torch.Tensor):
        positions = positions + seqlen_offsets.to(device=x.device, dtype=torch.long).view(-1, 1)
    else:
        positions = positions + int(seqlen_offsets)
    positions = positions.expand(batch, seqlen)
    inside = positions < cos.shape[0]
    index = positions.clamp(max=cos.shape[0] - 1)
    c = torch.where(inside.unsqueeze(-1), cos.float()[index], torch.ones((), device=x.device))
    s = torch.where(inside.unsqueeze(-1), sin.float()[index], torch.zeros((), device=x.device))
    c, s = c.unsqueeze(2), s.unsqueeze(2)  # (batch, seqlen, 1, half): broadcast over heads
    rotated = x[..., :rotary_dim].float()
    if interleaved:
        even, odd = rotated[..., 0::2], rotated[..., 1::2]
        out = torch.stack((even * c - odd * s, even * s + odd * c), dim=-1).flatten(-2)
    else:
        first, second = rotated[..., :half], rotated[..., half:]
        out = torch.cat((first * c - second * s, first * s + second * c), dim=-1)
    result = torch.cat((out.to(x.dtype), x[..., rotary_dim:]), dim=-1)
    if inplace:
        x.copy_(result)
        return x
    return result
