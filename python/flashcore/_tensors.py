"""torch.Tensor -> flashcore_tensor descriptors, and the argument checks the C library cannot make.

The library validates shapes, strides and options and names the argument it rejects. What it
cannot see is checked here, before anything is allocated or run: dtypes it has no code for
(float64), a device type it does not know, two CUDA tensors on different GPUs, empty tensors
(whose data pointer may be null).
"""

import ctypes
import struct

import torch

from flashcore import _library as lib
from flashcore._library import ArgumentError

_DTYPE_CODES = {
    torch.float16: lib.DTYPE_FLOAT16,
    torch.bfloat16: lib.DTYPE_BFLOAT16,
    torch.float32: lib.DTYPE_FLOAT32,
    torch.int32: lib.DTYPE_INT32,
}
_DEVICE_CODES = {"cpu": lib.DEVICE_CPU, "cuda": lib.DEVICE_CUDA}
_CUDA_CODES = (lib.DEVICE_CPU, lib.DEVICE_CUDA)  # indexed by Tensor.is_cuda
_INPUT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)  # float32: CPU tensors only

# flashcore_tensor's bytes: data, dtype, device, rank, 4 bytes of padding, shape[4], stride[4].
# Packing all descriptors of a call into one buffer with one struct.pack costs a fraction of
# building ctypes.Structure objects field by field, and the per-call overhead is what users feel.
_DESCRIPTOR_FORMAT = "Qiii4x4q4q"
_DESCRIPTOR_SIZE = struct.calcsize("=" + _DESCRIPTOR_FORMAT)
assert _DESCRIPTOR_SIZE == ctypes.sizeof(lib.CTensor) and lib.CTensor.shape.offset == 24
_PADDING = tuple((0,) * (lib.MAX_RANK - rank) for rank in range(lib.MAX_RANK + 1))
_NULL_DESCRIPTOR = (0, 0, 0, 0) + (0,) * (2 * lib.MAX_RANK)
_formats = {}  # descriptor count -> (struct.Struct, its buffer type)


_WORKSPACE = struct.Struct("@QQ")  # flashcore_options.workspace and .workspace_bytes
_TENSOR = torch.Tensor
_HALF_DTYPES = (torch.float16, torch.bfloat16)


Q_LAYOUT = "(batch, seqlen_q, nheads, headdim)"
KV_LAYOUT = "(batch, seqlen_k, nheads_k, headdim)"
Q_LAYOUT_VARLEN = "(total_q, nheads, headdim)"
KV_LAYOUT_VARLEN = "(total_k, nheads_k, headdim)"
KV_LAYOUT_PAGED = "(num_blocks, page_block_size, nheads_k, headdim)"


def pack(*tensors):
    """(buffer, addresses): flashcore_tensor descriptors viewing each tensor's memory (no copy),
    None for a None tensor. The addresses point into `buffer`, which must outlive the C call; it
    also keeps the tensors alive, so temporaries passed in stay valid as long as it does.
    Tensors are on the CPU or a CUDA device (check_attention_inputs saw to it): t.is_cuda picks the
    device code, several times cheaper than t.device.type."""
    values = []
    append = values.extend
    for t in tensors:
        if t is None:
            append(_NULL_DESCRIPTOR)
            continue
        shape = t.shape
        pad = _PADDING[len(shape)]
        append((t.data_ptr(), _DTYPE_CODES[t.dtype], _CUDA_CODES[t.is_cuda], len(shape), *shape, *pad,
                *t.stride(), *pad))
    count = len(tensors)
    formats = _formats.get(count)
    if formats is None:
        layout = struct.Struct("=" + _DESCRIPTOR_FORMAT * count)
        formats = _formats[count] = (layout, ctypes.c_char * layout.size)
    layout, buffer_type = formats
    buffer = buffer_type.from_buffer_copy(layout.pack(*values))
    buffer.tensors = tensors
    base = ctypes.addressof(buffer)
    return buffer, [None if t is None else base + i * _DESCRIPTOR_SIZE for i, t in enumerate(tensors)]


# A dense call's arguments in one buffer: its tensors' descriptors (rank 4, except the rank-3 LSE),
# then its flashcore_options (lib.OPTIONS_FORMAT), from one struct.pack without pack()'s per-tensor
# loop or a COptions built field by field.
_FORWARD_DENSE = struct.Struct("@" + _DESCRIPTOR_FORMAT * 5 + lib.OPTIONS_FORMAT)
_BACKWARD_DENSE = struct.Struct("@" + _DESCRIPTOR_FORMAT * 9 + lib.OPTIONS_FORMAT)
# The buffers' ctypes array types, held here: ctypes.create_string_buffer looks its array type up in a
# cache of weak references, and an array type is freed only by the garbage collector (a type refers
# to itself), so each collection after a call cost the next call a new type (~8 us on the CPU of
# docs/tuning/binding_overhead.md).
_FORWARD_BUFFER = ctypes.c_char * _FORWARD_DENSE.size
_BACKWARD_BUFFER = ctypes.c_char * _BACKWARD_DENSE.size


def _rank4(t, device):
    return (t.data_ptr(), _DTYPE_CODES[t.dtype], device, 4, *t.shape, *t.stride())


def pack_forward_dense(q, k, v, out, lse, options):
    """(buffer, the five descriptors' addresses, the options' address); `options` are COptions'
    fields in order (lib.option_values). `out` and `lse` as run_forward_dense allocates them:
    contiguous, q's shape and (batch, nheads, seqlen_q), so their layouts come from q's shape
    rather than two more shape and stride reads a call. The buffer must outlive the C call."""
    device = _CUDA_CODES[q.is_cuda]
    batch, seqlen_q, nheads, headdim = shape = q.shape
    row = nheads * headdim
    buffer = _FORWARD_BUFFER.from_buffer_copy(_FORWARD_DENSE.pack(
        q.data_ptr(), _DTYPE_CODES[q.dtype], device, 4, *shape, *q.stride(), *_rank4(k, device), *_rank4(v, device),
        out.data_ptr(), _DTYPE_CODES[q.dtype], device, 4, *shape, seqlen_q * row, row, headdim, 1,
        lse.data_ptr(), lib.DTYPE_FLOAT32, device, 3, batch, nheads, seqlen_q, 0, nheads * seqlen_q, seqlen_q, 1, 0,
        *options))
    base = ctypes.addressof(buffer)
    return buffer, (base, base + _DESCRIPTOR_SIZE, base + 2 * _DESCRIPTOR_SIZE, base + 3 * _DESCRIPTOR_SIZE,
                    base + 4 * _DESCRIPTOR_SIZE), base + 5 * _DESCRIPTOR_SIZE


def pack_backward_dense(q, k, v, out, dout, lse, dq, dk, dv, options):
    """pack_forward_dense for a backward's nine tensors."""
    device = _CUDA_CODES[q.is_cuda]
    buffer = _BACKWARD_BUFFER.from_buffer_copy(_BACKWARD_DENSE.pack(
        *_rank4(q, device), *_rank4(k, device), *_rank4(v, device), *_rank4(out, device), *_rank4(dout, device),
        lse.data_ptr(), lib.DTYPE_FLOAT32, device, 3, *lse.shape, 0, *lse.stride(), 0,
        *_rank4(dq, device), *_rank4(dk, device), *_rank4(dv, device), *options))
    base = ctypes.addressof(buffer)
    return buffer, tuple(base + i * _DESCRIPTOR_SIZE for i in range(9)), base + 9 * _DESCRIPTOR_SIZE


def set_workspace(buffer, count, address, nbytes):
    """Sets workspace and workspace_bytes of the options in a pack_*_dense buffer of `count` tensors."""
    _WORKSPACE.pack_into(buffer, count * _DESCRIPTOR_SIZE + lib.OPTIONS_WORKSPACE_OFFSET, address, nbytes)


def plain_dense_inputs(q, k, v):
    """Whether q, k, v pass check_attention_inputs(q, k, v) for certain and need nothing else from
    the Python side: plain rank-4 tensors of one dtype on the CPU or one CUDA device, none empty,
    headdim contiguous. Each test is a cheap attribute read; any other input (including every bad
    one) takes the full checks, which name what is wrong."""
    if not (type(q) is _TENSOR and type(k) is _TENSOR and type(v) is _TENSOR):
        return False
    dtype = q.dtype
    if not (k.dtype is dtype and v.dtype is dtype and q.dim() == 4 and k.dim() == 4 and v.dim() == 4
            and q.stride(3) == 1 and k.stride(3) == 1 and v.stride(3) == 1
            and q.numel() and k.numel() and v.numel()):
        return False
    if q.is_cuda:
        return (dtype in _HALF_DTYPES and k.is_cuda and v.is_cuda
                and q.get_device() == k.get_device() == v.get_device())
    return q.is_cpu and k.is_cpu and v.is_cpu and dtype in _INPUT_DTYPES


def check_tensor(name, t, rank, layout):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"flashcore: {name}: expected a torch.Tensor of shape {layout}, got {type(t).__name__}")
    if t.dim() != rank:
        raise ArgumentError(f"flashcore: {name}: expected a rank-{rank} tensor {layout}, got shape {tuple(t.shape)}")
    if t.numel() == 0:
        raise ArgumentError(f"flashcore: {name}: every dimension of {layout} must be at least 1, got shape "
                            f"{tuple(t.shape)}")
    if t.stride(-1) != 1 and t.shape[-1] != 1:
        raise ArgumentError(
            f"flashcore: {name}: the last dimension (headdim) must be contiguous (stride 1), got strides "
            f"{tuple(t.stride())}; call .contiguous() first")


def check_attention_inputs(q, k, v, varlen=False, paged=False):
    """q, k, v: rank 4 (rank 3, packed, with varlen; k and v rank-4 pages when paged), float16/bfloat16 (or float32
    on the CPU) of one dtype, on one CPU or CUDA device, headdim contiguous."""
    rank, q_layout, kv_layout = (3, Q_LAYOUT_VARLEN, KV_LAYOUT_VARLEN) if varlen else (4, Q_LAYOUT, KV_LAYOUT)
    kv_rank, kv_layout = (4, KV_LAYOUT_PAGED) if paged else (rank, kv_layout)
    check_tensor("q", q, rank, q_layout)
    check_tensor("k", k, kv_rank, kv_layout)
    check_tensor("v", v, kv_rank, kv_layout)
    if q.dtype not in _INPUT_DTYPES:
        raise ArgumentError(f"flashcore: q: expected dtype torch.float16, torch.bfloat16 or (on the CPU) "
                            f"torch.float32, got {q.dtype}")
    if q.device.type not in _DEVICE_CODES:
        raise ArgumentError(f"flashcore: q: expected a CPU or CUDA tensor, got one on {q.device}")
    if q.dtype == torch.float32 and q.device.type == "cuda":
        raise ArgumentError("flashcore: q: float32 inputs run on the CPU backend only; on CUDA pass torch.float16 "
                            "or torch.bfloat16")
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise ArgumentError(f"flashcore: {name}: expected dtype {q.dtype} like q, got {t.dtype}")
        if t.device != q.device:
            raise ArgumentError(f"flashcore: {name}: expected a tensor on {q.device} like q, got one on {t.device}")


def check_cu_seqlens(name, t, q):
    """cu_seqlens_q / cu_seqlens_k: an int32 (batch + 1) tensor on q's device (the library checks
    that the lengths match, and, for CPU tensors, the offsets themselves)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"flashcore: {name}: expected an int32 tensor of shape (batch + 1,), got {type(t).__name__}")
    if t.dtype != torch.int32:
        raise ArgumentError(f"flashcore: {name}: expected dtype torch.int32, got {t.dtype}")
    if t.device != q.device:
        raise ArgumentError(f"flashcore: {name}: expected a tensor on {q.device} like q, got one on {t.device}")
    if t.dim() != 1 or t.numel() < 2:
        raise ArgumentError(f"flashcore: {name}: expected shape (batch + 1,) with batch >= 1, got {tuple(t.shape)}")
