"""The C ABI (include/flashcore/c_api.h) called directly through ctypes, as any language would:
codes the C++ enums cannot hold, null pointers, the per-thread error message, and outputs
poisoned with NaN before each call so that an element the library forgot to write cannot pass."""

import ctypes
import threading

import pytest
import torch

import reference
from flashcore import _library as lib
from flashcore._tensors import pack

SCALE = 32 ** -0.5


def problem(seqlen_q=13, seqlen_k=21, nheads=4, nheads_k=2, headdim=32, dtype=torch.float16):
    q = torch.randn(2, seqlen_q, nheads, headdim, dtype=dtype)
    k = torch.randn(2, seqlen_k, nheads_k, headdim, dtype=dtype)
    v = torch.randn(2, seqlen_k, nheads_k, headdim, dtype=dtype)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((2, nheads, seqlen_q), float("nan"))
    return q, k, v, out, lse


def opts(causal=False, backend=lib.BACKEND_AUTO, scale=SCALE, **more):
    return ctypes.byref(lib.options(scale, causal, backend=backend, **more))


def forward(q, k, v, out, lse, causal=False, backend=lib.BACKEND_AUTO, scale=SCALE, **more):
    buffer, views = pack(q, k, v, out, lse)
    return lib.forward(*views, opts(causal, backend, scale, **more))


def test_versions():
    assert lib._lib.flashcore_c_abi_version() == lib.ABI_VERSION
    assert lib.version().count(".") == 2
    assert isinstance(lib.built_with_cuda(), bool)


@pytest.mark.parametrize("backend", [lib.BACKEND_AUTO, lib.BACKEND_CPU, lib.BACKEND_CPU_REFERENCE])
@pytest.mark.parametrize("causal", [False, True])
def test_poisoned_outputs_are_fully_written(backend, causal):
    q, k, v, out, lse = problem(seqlen_q=29, seqlen_k=17)  # causal: some rows see no key
    assert forward(q, k, v, out, lse, causal, backend) == lib.STATUS_OK
    assert lib.last_error() == ""
    assert not out.isnan().any() and not lse.isnan().any()
    out64, lse64 = reference.attention(q, k, v, causal=causal)
    torch.testing.assert_close(out.double(), out64, atol=2e-3, rtol=0)
    torch.testing.assert_close(lse.double(), lse64, atol=1e-4, rtol=0)

    dout = torch.randn_like(q)
    grads = [torch.full_like(t, float("nan")) for t in (q, k, v)]
    buffer, views = pack(q, k, v, out, dout, lse, *grads)
    needed = ctypes.c_size_t(123)
    assert lib.backward_workspace_size(*views, opts(causal, backend), ctypes.byref(needed)) == lib.STATUS_OK
    assert needed.value == 0, "the CPU backends need no workspace"
    assert lib.backward(*views, opts(causal, backend)) == lib.STATUS_OK
    for grad in grads:
        assert not grad.isnan().any()


def test_lse_is_optional():
    q, k, v, out, _ = problem()
    assert forward(q, k, v, out, None) == lib.STATUS_OK
    assert not out.isnan().any()


@pytest.mark.parametrize("field,value,match", [
    ("dtype", 7, "q: unknown dtype code 7"),
    ("device", -1, "q: unknown device code -1"),
    ("rank", 5, "q: rank 5 is outside 0..4"),
    ("data", None, "q: is null"),
])
def test_bad_tensor_struct(field, value, match):
    q, k, v, out, lse = problem()
    buffer, views = pack(q, k, v, out, lse)
    setattr(lib.CTensor.from_address(views[0]), field, value)
    assert lib.forward(*views, opts()) == lib.STATUS_INVALID_ARGUMENT
    assert match in lib.last_error()
    assert out.isnan().all(), "a rejected call writes nothing"


@pytest.mark.parametrize("position,name", [(0, "q"), (1, "k"), (2, "v"), (3, "out")])
def test_null_tensor_pointer(position, name):
    buffer, views = pack(*problem())
    views[position] = None
    assert lib.forward(*views, opts()) == lib.STATUS_INVALID_ARGUMENT
    assert f": {name}: is null" in lib.last_error()


def test_bad_backend_code():
    assert forward(*problem(), backend=9) == lib.STATUS_INVALID_ARGUMENT
    assert "backend: unknown backend code 9" in lib.last_error()


def test_cuda_backend_for_cpu_tensors():
    assert forward(*problem(), backend=lib.BACKEND_CUDA) == lib.STATUS_INVALID_ARGUMENT
    assert "backend: cuda needs CUDA tensors" in lib.last_error()


def test_workspace_size_needs_bytes():
    q, k, v, out, lse = problem()
    buffer, views = pack(q, k, v, out, torch.randn_like(q), lse, q.clone(), k.clone(), v.clone())
    assert lib.backward_workspace_size(*views, opts(), None) == lib.STATUS_INVALID_ARGUMENT
    assert "bytes: is null" in lib.last_error()


def test_backward_needs_lse():
    q, k, v, out, _ = problem()
    buffer, views = pack(q, k, v, out, torch.randn_like(q), None, q.clone(), k.clone(), v.clone())
    assert lib.backward(*views, opts()) == lib.STATUS_INVALID_ARGUMENT
    assert "lse: is null" in lib.last_error()


def test_workspace_pointer_and_size_must_agree():
    q, k, v, out, lse = problem()
    assert forward(q, k, v, out, lse) == lib.STATUS_OK
    buffer, views = pack(q, k, v, out, torch.randn_like(q), lse, q.clone(), k.clone(), v.clone())
    assert lib.backward(*views, opts(workspace_bytes=64)) == lib.STATUS_INVALID_ARGUMENT
    assert "workspace: is null but workspace_bytes is 64" in lib.last_error()


def test_last_error_is_per_thread_and_cleared_by_success():
    assert forward(*problem(), backend=9) == lib.STATUS_INVALID_ARGUMENT
    seen_elsewhere = []
    thread = threading.Thread(target=lambda: seen_elsewhere.append(lib.last_error()))
    thread.start()
    thread.join()
    assert seen_elsewhere == [""]
    assert "backend" in lib.last_error()
    assert forward(*problem()) == lib.STATUS_OK
    assert lib.last_error() == ""


def test_status_to_exception():
    assert lib.check(lib.STATUS_OK) is None
    forward(*problem(), backend=9)
    with pytest.raises(ValueError, match="backend"):
        lib.check(lib.STATUS_INVALID_ARGUMENT)
    with pytest.raises(NotImplementedError):
        lib.check(lib.STATUS_NOT_SUPPORTED)
    with pytest.raises(RuntimeError):
        lib.check(3)


def test_null_options_mean_defaults():
    q, k, v, out, lse = problem()
    buffer, views = pack(q, k, v, out, lse)
    assert lib.forward(*views, None) == lib.STATUS_OK
    out64, _ = reference.attention(q, k, v, causal=False)  # default scale 1/sqrt(head_dim)
    torch.testing.assert_close(out.double(), out64, atol=2e-3, rtol=0)


def test_options_init_gives_defaults():
    options = lib.COptions()
    lib._lib.flashcore_options_init(ctypes.byref(options))
    assert options.struct_size == ctypes.sizeof(lib.COptions)
    assert (options.has_softmax_scale, options.causal, options.backend, options.kernels, options.workspace_bytes) == (0, 0, 0, 0, 0)
    # The score options: no window (-1, -1), no softcap, no ALiBi.
    assert (options.window_left, options.window_right, options.softcap, options.alibi_slopes) == (-1, -1, 0.0, None)


def test_options_struct_before_the_score_options_keeps_no_window():
    # A caller built before window_left existed (ABI version 2's first struct, ending after
    # workspace_bytes) passes its smaller size: the library gives the window its -1 defaults, not
    # the zeros a window of (0, 0) would mean, whatever bytes follow in memory.
    options = lib.options(SCALE, False, window_left=0, window_right=0, softcap=5.0)
    options.struct_size = lib.COptions.window_left.offset
    q, k, v, out, lse = problem(seqlen_q=29, seqlen_k=17)
    buffer, views = pack(q, k, v, out, lse)
    assert lib.forward(*views, ctypes.byref(options)) == lib.STATUS_OK, lib.last_error()
    out64, _ = reference.attention(q, k, v)
    torch.testing.assert_close(out.double(), out64, atol=2e-3, rtol=0)


def test_score_options_through_the_c_abi():
    q, k, v, out, lse = problem(seqlen_q=29, seqlen_k=17)
    slopes = torch.rand(2, 4) * 0.3
    buffer, views = pack(q, k, v, out, lse, slopes)
    options = lib.options(SCALE, False, window_left=4, window_right=1, softcap=3.0, alibi_slopes=views[5])
    assert lib.forward(*views[:5], ctypes.byref(options)) == lib.STATUS_OK, lib.last_error()
    out64, _ = reference.attention(q, k, v, softmax_scale=SCALE, window_size=(4, 1), softcap=3.0, alibi_slopes=slopes)
    torch.testing.assert_close(out.double(), out64, atol=2e-3, rtol=0)


def test_bad_alibi_tensor_struct_names_alibi_slopes():
    q, k, v, out, lse = problem()
    slopes = torch.ones(4)
    buffer, views = pack(q, k, v, out, lse, slopes)
    ctypes.cast(views[5] + 8, ctypes.POINTER(ctypes.c_int32))[0] = 9  # dtype code
    options = lib.options(SCALE, False, alibi_slopes=views[5])
    assert lib.forward(*views[:5], ctypes.byref(options)) == lib.STATUS_INVALID_ARGUMENT
    assert "alibi_slopes: unknown dtype code 9" in lib.last_error()
    assert torch.isnan(out).all()


def test_older_smaller_options_struct_keeps_later_defaults():
    # A caller built against a header that ended after `causal` passes a smaller struct_size; the
    # library must not read the fields it does not know about (here: a bogus backend code).
    options = lib.options(SCALE, True, backend=9)
    options.struct_size = lib.COptions.causal.offset + ctypes.sizeof(ctypes.c_int32)
    q, k, v, out, lse = problem(seqlen_q=29, seqlen_k=17)
    buffer, views = pack(q, k, v, out, lse)
    assert lib.forward(*views, ctypes.byref(options)) == lib.STATUS_OK, lib.last_error()
    out64, _ = reference.attention(q, k, v, causal=True)
    torch.testing.assert_close(out.double(), out64, atol=2e-3, rtol=0)


def test_uninitialised_options_are_refused():
    options = lib.COptions()  # struct_size 0
    buffer, views = pack(*problem())
    assert lib.forward(*views, ctypes.byref(options)) == lib.STATUS_INVALID_ARGUMENT
    assert "options: struct_size is 0" in lib.last_error()


def test_bad_kernels_code():
    assert forward(*problem(), kernels=7) == lib.STATUS_INVALID_ARGUMENT
    assert "kernels: unknown kernel family code 7" in lib.last_error()


def test_forced_gpu_family_on_cpu_tensors():
    assert forward(*problem(), kernels=lib.KERNELS_SM90) == lib.STATUS_INVALID_ARGUMENT
    assert "kernels: sm90 names GPU kernels" in lib.last_error()


def test_selected_kernels_on_cpu_is_auto():
    q, k, v, out, lse = problem()
    buffer, views = pack(q, k, v, out, lse, None, None, None, None)
    family = ctypes.c_int32(-1)
    assert lib.selected_kernels(*views, 0, opts(), ctypes.byref(family)) == lib.STATUS_OK, lib.last_error()
    assert family.value == lib.KERNELS_AUTO


def test_block_table_in_the_options():
    """ABI version 5's block_table: a paged varlen forward runs (test_varlen.py checks its numbers);
    the backward and the KV-cache call, which take no pages through the options, refuse it by name;
    a v4-sized struct (ending before it) leaves it absent."""
    table = torch.tensor([[1], [0]], dtype=torch.int32)
    q = torch.randn(5, 2, 32, dtype=torch.float16)
    pages = torch.randn(2, 4, 2, 32, dtype=torch.float16)
    cu_q = torch.tensor([0, 3, 5], dtype=torch.int32)
    cu_k = torch.tensor([0, 4, 6], dtype=torch.int32)
    out, lse = torch.full_like(q, float("nan")), torch.full((2, 5), float("nan"))
    buffer, views = pack(q, pages, pages, out, lse, cu_q, cu_k, table)
    paged = dict(cu_seqlens_q=views[5], cu_seqlens_k=views[6], max_seqlen_q=3, max_seqlen_k=4, block_table=views[7])
    assert lib.forward(*views[:5], opts(**paged)) == lib.STATUS_OK, lib.last_error()
    assert not torch.isnan(out).any()
    grads = pack(q, pages, pages, out, torch.randn_like(q), lse, q.clone(), pages.clone(), pages.clone())
    assert lib.backward(*grads[1], opts(**paged)) == lib.STATUS_INVALID_ARGUMENT
    assert "block_table: the backward takes no paged keys" in lib.last_error()
    options = lib.options(SCALE, False, **paged)
    options.struct_size = lib.COptions.block_table.offset  # a caller built against ABI version 4
    assert lib.forward(*views[:5], ctypes.byref(options)) == lib.STATUS_INVALID_ARGUMENT
    assert "k: expected rank 3" in lib.last_error()  # pages seen as packed keys: no block_table read
