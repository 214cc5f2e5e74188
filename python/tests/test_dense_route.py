"""flash_attn_func's dense route (flashcore._ops.attention_dense): the argument buffer it packs is
the C structs the general route builds, and its results and errors are the general route's."""

import ctypes
import gc

import pytest
import torch

from flashcore import _library as lib
from flashcore import flash_attn_interface
from flashcore._tensors import pack, pack_backward_dense, pack_forward_dense, set_workspace


def _options_bytes(address):
    return ctypes.string_at(address, ctypes.sizeof(lib.COptions))


def test_packed_options_are_the_struct_the_general_route_builds():
    q = torch.randn(2, 5, 3, 16)
    out, lse = torch.empty_like(q), torch.empty(2, 3, 5)
    for scale, causal, threads, stream in ((0.25, False, 3, None), (1.5, True, 0, 0x7F00DEAD)):
        buffer, views, options_address = pack_forward_dense(
            q, q, q, out, lse, lib.option_values(scale, causal, num_threads=threads, stream=stream))
        expected = lib.options(scale, causal, num_threads=threads, stream=stream)
        assert _options_bytes(options_address) == bytes(expected)
        reference_buffer, reference_views = pack(q, q, q, out, lse)
        for view, reference in zip(views, reference_views):
            assert ctypes.string_at(view, ctypes.sizeof(lib.CTensor)) == \
                ctypes.string_at(reference, ctypes.sizeof(lib.CTensor))


def test_set_workspace_writes_the_workspace_fields():
    q = torch.randn(1, 4, 2, 8)
    lse = torch.empty(1, 2, 4)
    buffer, views, options_address = pack_backward_dense(q, q, q, q, q, lse, q, q, q, lib.option_values(0.5, True))
    set_workspace(buffer, len(views), 0x1000, 4096)
    options = lib.COptions.from_buffer_copy(_options_bytes(options_address))
    assert (options.workspace, options.workspace_bytes, options.causal, options.softmax_scale) == (0x1000, 4096, 1, 0.5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("causal", [False, True])
def test_dense_route_matches_the_general_route(device, dtype, causal):
    if device == "cuda" and dtype == torch.float32:
        pytest.skip("float32 runs on the CPU backend only")
    q = torch.randn(2, 33, 4, 64, dtype=dtype, device=device, requires_grad=True)
    k, v = (torch.randn(2, 40, 2, 64, dtype=dtype, device=device, requires_grad=True) for _ in range(2))
    dout = torch.randn(2, 33, 4, 64, dtype=dtype, device=device)
    for scale in (None, 0.3):
        fast = flash_attn_interface.flash_attn_func(q, k, v, softmax_scale=scale, causal=causal)
        general = flash_attn_interface._attention(q, k, v, scale, causal, False, (-1, -1), 0.0, None, False)
        assert torch.equal(fast, general)
        for a, b in zip(torch.autograd.grad(fast, (q, k, v), dout), torch.autograd.grad(general, (q, k, v), dout)):
            assert torch.equal(a, b)


@pytest.mark.parametrize("options, error", [
    ({"window_size": (-1.0, -1.0)}, ValueError),  # equal to the default, but not ints
    ({"window_size": None}, TypeError),
    ({"dropout_p": True}, TypeError),
    ({"softcap": "0"}, TypeError),
    ({"softmax_scale": float("nan")}, ValueError),
])
def test_options_that_only_look_like_defaults_take_the_full_checks(options, error):
    q = torch.randn(1, 4, 2, 16)
    with pytest.raises(error):
        flash_attn_interface.flash_attn_func(q, q, q, **options)


def test_dense_calls_leave_nothing_for_the_garbage_collector(device):
    """create_string_buffer's array types are cached weakly and refer to themselves, so each gc run
    freed them and the next call built them again (docs/tuning/binding_overhead.md); the dense
    route's buffers use types the module holds, so a call leaves no ctypes cycle behind. Only ctypes
    garbage counts: after test_compile.py, torch's own tracing state leaves cycles of its own
    (FakeTensor, FrameSummary) in the same process."""
    q = torch.randn(1, 8, 2, 16, dtype=torch.float16, device=device, requires_grad=True)
    dout = torch.randn_like(q)
    for _ in range(3):
        flash_attn_interface.flash_attn_func(q, q, q).backward(dout)
    gc.collect()
    gc.disable()
    try:
        for _ in range(5):
            flash_attn_interface.flash_attn_func(q, q, q).backward(dout)
            flash_attn_interface.flash_attn_func(q.detach(), q.detach(), q.detach())
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        ctypes_garbage = [o for o in gc.garbage if isinstance(o, (ctypes.Array, ctypes.Structure)) or
                          (isinstance(o, type) and issubclass(o, (ctypes.Array, ctypes.Structure)))]
        assert ctypes_garbage == []
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
