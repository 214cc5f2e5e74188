"""Rotary embeddings are flash_attn_with_kvcache's (not implemented here)."""


def apply_rotary_emb(*args, **kwargs):
    raise NotImplementedError("flashcore: apply_rotary_emb (rotary embeddings for the KV cache) is not implemented")
