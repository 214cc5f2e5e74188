"""flash_attn.bert_padding's two helpers the tests use, written for this shim: padded
(batch, seqlen, ...) tensors to packed rows and back, differentiable."""

import torch
import torch.nn.functional as F


def unpad_input(hidden_states, attention_mask, unused_mask=None):
    """(rows, indices, cu_seqlens, max_seqlen, used_seqlens): the rows where attention_mask (or
    unused_mask) is set, their flat indices into batch * seqlen, int32 offsets of each sequence, the
    longest sequence, and each sequence's count of attention_mask rows."""
    mask = attention_mask if unused_mask is None else (attention_mask.bool() | unused_mask.bool())
    seqlens = mask.sum(dim=-1, dtype=torch.int32)
    used = attention_mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(mask.flatten(), as_tuple=False).flatten()
    cu_seqlens = F.pad(torch.cumsum(seqlens, dim=0, dtype=torch.int32), (1, 0))
    rows = hidden_states.reshape(-1, *hidden_states.shape[2:])[indices]
    return rows, indices, cu_seqlens, int(seqlens.max().item()), used


def pad_input(hidden_states, indices, batch, seqlen):
    """The packed rows back at `indices` of a zero (batch, seqlen, ...) tensor."""
    out = hidden_states.new_zeros(batch * seqlen, *hidden_states.shape[1:])
    out = out.index_put((indices,), hidden_states)
    return out.reshape(batch, seqlen, *hidden_states.shape[1:])
