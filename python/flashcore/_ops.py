"""flashcore's forward and backward for PyTorch: the calls into the library, registered as
torch.library custom ops, and the route each call takes.

The custom ops (flashcore::attention_forward -> (out, lse), flashcore::attention_backward ->
(dq, dk, dv)) have fake implementations and an autograd formula, so torch.compile traces through
flashcore (fullgraph=True works) and compiled graphs run the library's backward pass.

Eager calls on plain tensors skip the dispatcher: a custom op's Python round trip through it costs
tens of microseconds a call, several times SDPA's whole overhead. They run the same two functions
(run_forward, run_backward) under a torch.autograd.Function instead. Whatever else is going on
(compiling, a dispatch mode such as FakeTensorMode, tensor subclasses) takes the custom ops.

Outputs are allocated with torch.empty*, so CUDA memory comes from PyTorch's caching allocator, and
kernels launch on PyTorch's current CUDA stream without synchronising.
"""

import ctypes
from typing import Optional

import torch

from flashcore import _library as lib
from flashcore._tensors import pack, pack_backward_dense, pack_forward_dense, set_workspace

_CONTIGUOUS = torch.contiguous_format
_FLOAT32 = torch.float32
# torch's own getters of the raw current stream and the current device: torch.cuda.current_stream()
# builds a Stream object and torch.cuda.current_device() initialises CUDA lazily first, which costs
# microseconds a call (docs/tuning/binding_overhead.md). A CUDA tensor in hand means CUDA is
# initialised. A torch without them (never seen) gets the public calls.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_current_device = getattr(torch._C, "_cuda_getDevice", None)
if _raw_stream is None or _current_device is None:
    def _raw_stream(index):
        return torch.cuda.current_stream(index).cuda_stream

    def _current_device():
        return torch.cuda.current_device()
_grad_enabled = torch.is_grad_enabled
_dispatch_stack_depth = torch._C._len_torch_dispatch_stack
_is_compiling = torch.compiler.is_compiling


def _launch_context(device):
    """(stream, num_threads, device guard or None) for a call on `device`: PyTorch's current stream,
    or for the CPU the thread count PyTorch was told to use (torch.set_num_threads)."""
    if device.type == "cuda":
        current = _current_device()
        index = current if device.index is None else device.index
        return _raw_stream(index), 0, torch.cuda.device(index) if index != current else None
    return None, torch.get_num_threads(), None


def _lse_shape(q, varlen):
    """The LSE's shape: (batch, nheads, seqlen_q), or (nheads, total_q) for packed sequences."""
    if varlen:
        return (q.shape[1], q.shape[0])
    return (q.shape[0], q.shape[2], q.shape[1])


def run_forward(q, k, v, softmax_scale, causal, window_left=-1, window_right=-1, softcap=0.0, alibi_slopes=None,
                cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0, dropout_p=0.0, dropout_seed=0,
                dropout_offset=0, block_table=None):
    """(out, lse) from the library; out is contiguous whatever q's strides. With cu_seqlens_q/k the
    tensors are packed (total, nheads, headdim) sequences (flash_attn's varlen layout), and with
    block_table k and v are pages (num_blocks, page_block_size, nheads_k, headdim). dropout_p > 0:
    dropout with the library's Philox stream keyed by (dropout_seed, dropout_offset)."""
    out = torch.empty_like(q, memory_format=_CONTIGUOUS)
    lse = q.new_empty(_lse_shape(q, cu_seqlens_q is not None), dtype=_FLOAT32)
    descriptors, views = pack(q, k, v, out, lse, alibi_slopes, cu_seqlens_q, cu_seqlens_k, block_table)
    stream, num_threads, guard = _launch_context(q.device)
    options = ctypes.byref(lib.options(softmax_scale, causal, stream=stream, num_threads=num_threads,
                                       window_left=window_left, window_right=window_right, softcap=softcap,
                                       alibi_slopes=views[5], cu_seqlens_q=views[6], cu_seqlens_k=views[7],
                                       max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, dropout_p=dropout_p,
                                       dropout_seed=dropout_seed, dropout_offset=dropout_offset,
                                       block_table=views[8]))
    if guard is None:
        status = lib.forward(*views[:5], options)
    else:
        with guard:
            status = lib.forward(*views[:5], options)
    if status:
        lib.check(status)
    return out, lse


def run_backward(dout, q, k, v, out, lse, softmax_scale, causal, deterministic, window_left=-1, window_right=-1,
                 softcap=0.0, alibi_slopes=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0,
                 max_seqlen_k=0, dropout_p=0.0, dropout_seed=0, dropout_offset=0):
    """(dq, dk, dv) from the library, given the forward's out and lse (and its dropout)."""
    # Autograd may hand over a broadcast gradient (out.sum()'s has stride 0 everywhere); the library
    # needs headdim contiguous, so only then is dout copied.
    if dout.stride(-1) != 1:
        dout = dout.contiguous()
    dq = torch.empty_like(q, memory_format=_CONTIGUOUS)
    dk = torch.empty_like(k, memory_format=_CONTIGUOUS)
    dv = torch.empty_like(v, memory_format=_CONTIGUOUS)
    descriptors, views = pack(q, k, v, out, dout, lse, dq, dk, dv, alibi_slopes, cu_seqlens_q, cu_seqlens_k)
    stream, num_threads, guard = _launch_context(q.device)
    options = lib.options(softmax_scale, causal, deterministic, stream=stream, num_threads=num_threads,
                          window_left=window_left, window_right=window_right, softcap=softcap,
                          alibi_slopes=views[9], cu_seqlens_q=views[10], cu_seqlens_k=views[11],
                          max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, dropout_p=dropout_p,
                          dropout_seed=dropout_seed, dropout_offset=dropout_offset)
    if guard is None:
        _backward_call(views[:9], options, q.device)
    else:
        with guard:
            _backward_call(views[:9], options, q.device)
    return dq, dk, dv


def run_merge(out_a, lse_a, out_b, lse_b, out, lse):
    """Writes into out (and lse, if not None) the merge of two partial results over disjoint key
    sets (flashcore/merge.h); out / lse may be out_a / lse_a themselves (in place)."""
    descriptors, views = pack(out_a, lse_a, out_b, lse_b, out, lse)
    stream, num_threads, guard = _launch_context(out_a.device)
    options = ctypes.byref(lib.options(None, stream=stream, num_threads=num_threads))
    if guard is None:
        status = lib.merge_partials(*views, options)
    else:
        with guard:
            status = lib.merge_partials(*views, options)
    if status:
        lib.check(status)


# --- the dense route: flash_attn_func with its default options ------------------------------------

def eager():
    """Whether a call may skip the custom ops: not being compiled, no dispatch mode active."""
    return not _is_compiling() and _dispatch_stack_depth() == 0


def _dense_launch(q, softmax_scale, causal, deterministic):
    """(option values, device to make current or None) for a dense call without options on q's
    device: PyTorch's current stream there, or the CPU thread count PyTorch was told to use."""
    if q.is_cuda:
        device = q.get_device()
        return (lib.option_values(softmax_scale, causal, deterministic, stream=_raw_stream(device)),
                None if device == _current_device() else device)
    return lib.option_values(softmax_scale, causal, deterministic, num_threads=torch.get_num_threads()), None


def run_forward_dense(q, k, v, softmax_scale, causal):
    """run_forward for inputs that pass _tensors.plain_dense_inputs and no score option, dropout or
    packed sequences: the same call with less Python around it (one packed argument buffer, the raw
    stream getter)."""
    out = torch.empty_like(q, memory_format=_CONTIGUOUS)
    batch, seqlen_q, nheads, _ = q.shape
    lse = q.new_empty((batch, nheads, seqlen_q), dtype=_FLOAT32)
    options, guard_device = _dense_launch(q, softmax_scale, causal, False)
    buffer, views, options_address = pack_forward_dense(q, k, v, out, lse, options)
    if guard_device is None:
        status = lib.forward(*views, options_address)
    else:
        with torch.cuda.device(guard_device):
            status = lib.forward(*views, options_address)
    if status:
        lib.check(status)
    return out, lse


def run_backward_dense(dout, q, k, v, out, lse, softmax_scale, causal, deterministic):
    """run_backward for run_forward_dense's calls."""
    if dout.stride(-1) != 1:  # a broadcast gradient (see run_backward)
        dout = dout.contiguous()
    dq = torch.empty_like(q, memory_format=_CONTIGUOUS)
    dk = torch.empty_like(k, memory_format=_CONTIGUOUS)
    dv = torch.empty_like(v, memory_format=_CONTIGUOUS)
    options, guard_device = _dense_launch(q, softmax_scale, causal, deterministic)
    buffer, views, options_address = pack_backward_dense(q, k, v, out, dout, lse, dq, dk, dv, options)
    if guard_device is None:
        _backward_dense_call(buffer, views, options_address, q)
    else:
        with torch.cuda.device(guard_device):
            _backward_dense_call(buffer, views, options_address, q)
    return dq, dk, dv


def _backward_dense_call(buffer, views, options_address, q):
    if q.is_cuda:
        needed = ctypes.c_size_t(0)
        status = lib.backward_workspace_size(*views, options_address, ctypes.byref(needed))
        if status:
            lib.check(status)
        if needed.value:
            # Freed on return while the kernel may still run: safe (see _backward_call).
            scratch = torch.empty(needed.value, dtype=torch.uint8, device=q.device)
            set_workspace(buffer, len(views), scratch.data_ptr(), needed.value)
    status = lib.backward(*views, options_address)
    if status:
        lib.check(status)


class _DenseAttention(torch.autograd.Function):
    """_EagerAttention for run_forward_dense's calls: five saved tensors, three options."""

    # options: (softmax_scale, causal, deterministic), one argument: apply() costs per argument.
    @staticmethod
    def forward(ctx, q, k, v, options):
        out, lse = run_forward_dense(q, k, v, options[0], options[1])
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.options = options
        ctx.mark_non_differentiable(lse)
        # The LSE takes no gradient, yet autograd would fill one with zeros (an allocation and a fill
        # kernel a backward) for the backward to ignore; a missing dout is made here instead.
        ctx.set_materialize_grads(False)
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        q, k, v, out, lse = ctx.saved_tensors
        _refuse_double_backward(q, k, v)
        if dout is None:
            dout = torch.zeros_like(out)
        return (*run_backward_dense(dout, q, k, v, out, lse, *ctx.options), None)


def attention_dense(q, k, v, softmax_scale, causal, deterministic):
    """attention() for inputs that pass _tensors.plain_dense_inputs and no option, called when
    eager() holds: (out, lse)."""
    if _grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return _DenseAttention.apply(q, k, v, (softmax_scale, causal, deterministic))
    return run_forward_dense(q, k, v, softmax_scale, causal)


def _backward_call(views, options, device):
    if device.type == "cuda":
        needed = ctypes.c_size_t(0)
        lib.check(lib.backward_workspace_size(*views, ctypes.byref(options), ctypes.byref(needed)))
        if needed.value:
            # Freed when this function returns, while the kernel may still run: safe, because the
            # caching allocator hands the block out again only in order on this same stream.
            scratch = torch.empty(needed.value, dtype=torch.uint8, device=device)
            options.workspace, options.workspace_bytes = scratch.data_ptr(), needed.value
    status = lib.backward(*views, ctypes.byref(options))
    if status:
        lib.check(status)


# --- torch.library custom ops: what torch.compile and dispatch modes see -------------------------

@torch.library.custom_op("flashcore::attention_forward", mutates_args=())
def attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, softmax_scale: float, causal: bool,
                      deterministic: bool, window_left: int = -1, window_right: int = -1, softcap: float = 0.0,
                      alibi_slopes: Optional[torch.Tensor] = None, cu_seqlens_q: Optional[torch.Tensor] = None,
                      cu_seqlens_k: Optional[torch.Tensor] = None, max_seqlen_q: int = 0,
                      max_seqlen_k: int = 0, dropout_p: float = 0.0, dropout_seed: int = 0,
                      dropout_offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, lse). `deterministic` does not change the forward; it is an input so that the
    autograd formula can hand it to the backward."""
    return run_forward(q, k, v, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes, cu_seqlens_q,
                       cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, dropout_seed, dropout_offset)


@attention_forward.register_fake
def _(q, k, v, softmax_scale, causal, deterministic, window_left=-1, window_right=-1, softcap=0.0, alibi_slopes=None,
      cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0, dropout_p=0.0, dropout_seed=0,
      dropout_offset=0):
    return (torch.empty_like(q, memory_format=_CONTIGUOUS),
            q.new_empty(_lse_shape(q, cu_seqlens_q is not None), dtype=_FLOAT32))


@torch.library.custom_op("flashcore::attention_backward", mutates_args=())
def attention_backward(dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                       lse: torch.Tensor, softmax_scale: float, causal: bool, deterministic: bool,
                       window_left: int = -1, window_right: int = -1, softcap: float = 0.0,
                       alibi_slopes: Optional[torch.Tensor] = None, cu_seqlens_q: Optional[torch.Tensor] = None,
                       cu_seqlens_k: Optional[torch.Tensor] = None, max_seqlen_q: int = 0,
                       max_seqlen_k: int = 0, dropout_p: float = 0.0, dropout_seed: int = 0,
                       dropout_offset: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) from the forward's out and lse."""
    return run_backward(dout, q, k, v, out, lse, softmax_scale, causal, deterministic, window_left, window_right,
                        softcap, alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
                        dropout_seed, dropout_offset)


@attention_backward.register_fake
def _(dout, q, k, v, out, lse, softmax_scale, causal, deterministic, window_left=-1, window_right=-1, softcap=0.0,
      alibi_slopes=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0, dropout_p=0.0,
      dropout_seed=0, dropout_offset=0):
    return tuple(torch.empty_like(t, memory_format=_CONTIGUOUS) for t in (q, k, v))


def _refuse_double_backward(q, k, v):
    """The backward is a library call autograd cannot see into, so its gradients carry no graph:
    a second-order gradient through it would silently be missing (or zero). Refuse it where it is
    asked for: create_graph=True makes autograd run this backward with grad mode on."""
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        raise RuntimeError(
            "flashcore: double backward is not supported: flash_attn_func's backward is not itself "
            "differentiable, so a gradient taken with create_graph=True (for a second-order gradient, "
            "a gradient penalty or a Hessian-vector product) would have no graph. Use create_graph=False, "
            "or torch.nn.functional.scaled_dot_product_attention where second-order gradients are needed.")


# window_left, window_right, softcap, alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
# dropout_p, dropout_seed, dropout_offset
_OPTION_DEFAULTS = (-1, -1, 0.0, None, None, None, 0, 0, 0.0, 0, 0)


def _setup_context(ctx, inputs, output):
    q, k, v, softmax_scale, causal, deterministic, *options = inputs
    (window_left, window_right, softcap, alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
     max_seqlen_k, dropout_p, dropout_seed, dropout_offset) = (*options, *_OPTION_DEFAULTS[len(options):])
    ctx.num_inputs = len(inputs)
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, alibi_slopes, cu_seqlens_q, cu_seqlens_k)
    ctx.softmax_scale, ctx.causal, ctx.deterministic = softmax_scale, causal, deterministic
    ctx.window_left, ctx.window_right, ctx.softcap = window_left, window_right, softcap
    ctx.max_seqlen_q, ctx.max_seqlen_k = max_seqlen_q, max_seqlen_k
    ctx.dropout = (dropout_p, dropout_seed, dropout_offset)  # the backward draws the same mask again


def _op_backward(ctx, dout, dlse):
    # The LSE is returned for inspection (return_attn_probs); like flash_attn, flashcore does not
    # differentiate through it, so dlse carries nothing.
    q, k, v, out, lse, alibi_slopes, cu_seqlens_q, cu_seqlens_k = ctx.saved_tensors
    _refuse_double_backward(q, k, v)
    dq, dk, dv = attention_backward(dout, q, k, v, out, lse, ctx.softmax_scale, ctx.causal, ctx.deterministic,
                                    ctx.window_left, ctx.window_right, ctx.softcap, alibi_slopes, cu_seqlens_q,
                                    cu_seqlens_k, ctx.max_seqlen_q, ctx.max_seqlen_k, *ctx.dropout)
    return (dq, dk, dv) + (None,) * (ctx.num_inputs - 3)


attention_forward.register_autograd(_op_backward, setup_context=_setup_context)


# --- the eager route ----------------------------------------------------------------------------

class _EagerAttention(torch.autograd.Function):
    """The custom ops' autograd formula without the dispatcher round trips."""

    @staticmethod
    def forward(ctx, q, k, v, softmax_scale, causal, deterministic, *options):
        out, lse = run_forward(q, k, v, softmax_scale, causal, *options)
        _setup_context(ctx, (q, k, v, softmax_scale, causal, deterministic, *options), (out, lse))
        ctx.mark_non_differentiable(lse)
        ctx.set_materialize_grads(False)  # as in _DenseAttention: no zero LSE gradient
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        q, k, v, out, lse, alibi_slopes, cu_seqlens_q, cu_seqlens_k = ctx.saved_tensors
        _refuse_double_backward(q, k, v)
        if dout is None:
            dout = torch.zeros_like(out)
        dq, dk, dv = run_backward(dout, q, k, v, out, lse, ctx.softmax_scale, ctx.causal, ctx.deterministic,
                                  ctx.window_left, ctx.window_right, ctx.softcap, alibi_slopes, cu_seqlens_q,
                                  cu_seqlens_k, ctx.max_seqlen_q, ctx.max_seqlen_k, *ctx.dropout)
        return (dq, dk, dv) + (None,) * (ctx.num_inputs - 3)


def attention(q, k, v, softmax_scale, causal, deterministic, window_left=-1, window_right=-1, softcap=0.0,
              alibi_slopes=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0, dropout_p=0.0,
              dropout_seed=0, dropout_offset=0):
    """(out, lse) for checked inputs, by the cheapest route that is correct in the current context.
    The LSE is (batch, nheads, seqlen_q), or (nheads, total_q) with cu_seqlens; it takes no gradient."""
    options = (window_left, window_right, softcap, alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
               max_seqlen_k, dropout_p, dropout_seed, dropout_offset)
    plain = (type(q) is torch.Tensor and type(k) is torch.Tensor and type(v) is torch.Tensor
             and not torch.compiler.is_compiling() and torch._C._len_torch_dispatch_stack() == 0)
    if not plain:
        return attention_forward(q, k, v, softmax_scale, causal, deterministic, *options)
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return _EagerAttention.apply(q, k, v, softmax_scale, causal, deterministic, *options)
    return run_forward(q, k, v, softmax_scale, causal, *options)
