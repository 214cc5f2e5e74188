"""Dropout's random stream on the Python side: where each call's seed and offset come from, and
the keep mask itself (for return_attn_probs), drawn with torch ops from the same Philox4x32-10
mapping the library uses (flashcore/attention.h, "dropout")."""

import torch

_MASK32 = 0xFFFFFFFF


def seed_and_offset(device):
    """(seed, offset) for one dropout call, from PyTorch's generator of `device`, so that
    torch.manual_seed reproduces a run. CUDA: the device's default generator's seed and its Philox
    offset, advanced by one per call (as PyTorch's own random ops advance it). CPU: two draws from
    the default generator. The offset is taken modulo 2^32 (the stream's offset word). Not safe
    under CUDA graph capture (the offset is read on the host)."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        gen = torch.cuda.default_generators[index]
        seed = gen.initial_seed() & ((1 << 63) - 1)
        offset = gen.get_offset()
        gen.set_offset(offset + 4)
        return seed, (offset // 4) & _MASK32
    seed, offset = torch.randint(0, 1 << 62, (2,)).tolist()
    return seed, offset & _MASK32


def _philox(x, y, z, w, key0, key1):
    """Philox4x32-10 on int64 tensors holding uint32 values (key0/key1: Python ints)."""
    m0, m1 = 0xD2511F53, 0xCD9E8D57
    for _ in range(10):
        # 32x32 -> 64-bit products overflow int64 for large operands: split the multiplier in halves.
        hi0, lo0 = _mul_wide(x, m0)
        hi1, lo1 = _mul_wide(z, m1)
        x, y, z, w = hi1 ^ y ^ key0, lo1, hi0 ^ w ^ key1, lo0
        key0 = (key0 + 0x9E3779B9) & _MASK32
        key1 = (key1 + 0xBB67AE85) & _MASK32
    return x, y, z, w


def _mul_wide(a, m):
    """(high, low) 32-bit words of a * m for int64 tensors a < 2^32 and a Python int m < 2^32."""
    m_lo, m_hi = m & 0xFFFF, m >> 16
    lo_part = a * m_lo                 # < 2^48
    hi_part = a * m_hi                 # < 2^48
    low = (lo_part + ((hi_part & 0xFFFF) << 16)) & _MASK32
    high = ((hi_part >> 16) + ((lo_part + ((hi_part & 0xFFFF) << 16)) >> 32)) & _MASK32
    return high, low


def keep_mask(batch, heads, seqlen_q, seqlen_k, dropout_p, seed, offset, device, batch0=0):
    """Bool (batch, heads, seqlen_q, seqlen_k): which probabilities the library keeps."""
    i = torch.arange(seqlen_q, device=device, dtype=torch.int64).view(1, 1, -1, 1)
    j = torch.arange(seqlen_k, device=device, dtype=torch.int64).view(1, 1, 1, -1)
    b = torch.arange(batch, device=device, dtype=torch.int64).view(-1, 1, 1, 1) + batch0
    h = torch.arange(heads, device=device, dtype=torch.int64).view(1, -1, 1, 1)
    shape = (batch, heads, seqlen_q, seqlen_k)
    x = ((i // 16) * 8 + i % 8).expand(shape)
    y = (((j // 64) * 4 + (j % 8) // 2) * 2 + (j // 8) % 2).expand(shape)
    z = ((b * heads + h) & _MASK32).expand(shape)
    w = torch.full(shape, offset & _MASK32, device=device, dtype=torch.int64)
    r = _philox(x, y, z, w, seed & _MASK32, (seed >> 32) & _MASK32)
    words = torch.stack(r, dim=0)  # (4, batch, heads, seqlen_q, seqlen_k)
    word = torch.gather(words, 0, ((j % 64) // 16).expand(shape).unsqueeze(0)).squeeze(0)
    shift = 8 * (((i % 16) // 8) * 2 + j % 2)
    byte = (word >> shift.expand(shape)) & 0xFF
    keep_max = int((1.0 - float(torch.tensor(dropout_p, dtype=torch.float32))) * 255.0 // 1)
    return byte <= keep_max
