"""Peak device memory of one forward call: flashcore against standard attention (S and P
materialised) and SDPA's flash backend, at one shape.

Measured with PyTorch's allocator statistics, so it sees every tensor created through torch
(flashcore's binding allocates its outputs through torch). `peak_bytes` counts the inputs, the
output and any workspace; `extra_bytes` excludes the inputs.
"""
import gc

from .impls import TORCH_DTYPES, first_line, standard_attention


def measure(torch, cell, flash_attn_func, backend_context):
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    dtype = getattr(torch, TORCH_DTYPES[cell.dtype])
    gen = torch.Generator(device="cuda")
    gen.manual_seed(cell.seqlen_q)
    # flashcore's layout is (B, S, H, D); standard attention and SDPA get contiguous (B, H, S, D).
    dims = ((cell.batch, cell.seqlen_q, cell.heads, cell.head_dim) if cell.impl == "flashcore"
            else (cell.batch, cell.heads, cell.seqlen_q, cell.head_dim))
    q, k, v = (torch.randn(*dims, device="cuda", dtype=dtype, generator=gen) for _ in range(3))
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    with torch.no_grad(), backend_context:
        if cell.impl == "flashcore":
            out = flash_attn_func(q, k, v, causal=cell.causal)
        elif cell.impl == "standard":
            out = standard_attention(torch, q, k, v, cell.causal)
        else:
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=cell.causal)
        torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    del out, q, k, v
    element = torch.finfo(dtype).bits // 8
    row = cell.row(reason=None, peak_bytes=peak - before, extra_bytes=peak - base, inputs_bytes=base - before,
                   scores_bytes=cell.batch * cell.heads * cell.seqlen_q * cell.seqlen_k * element)
    row["reason"] = None
    return row


def oom_row(cell, error):
    row = cell.row(reason=f"out of memory: {first_line(error, 200)}", peak_bytes=None, extra_bytes=None)
    return row
