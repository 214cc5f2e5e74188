"""Every bad input gets a clear exception naming the argument, before anything runs (window_size,
softcap, alibi_slopes, dropout_p and return_attn_probs are implemented: test_options.py,
test_varlen.py and test_dropout.py check their numbers)."""

import math

import pytest
import torch

from flashcore import flash_attn_func, flash_attn_kvpacked_func, flash_attn_qkvpacked_func


def qkv(device="cpu", dtype=torch.float16, batch=2, seqlen_q=8, seqlen_k=8, nheads=4, nheads_k=4, headdim=32):
    return (torch.randn(batch, seqlen_q, nheads, headdim, dtype=dtype, device=device),
            torch.randn(batch, seqlen_k, nheads_k, headdim, dtype=dtype, device=device),
            torch.randn(batch, seqlen_k, nheads_k, headdim, dtype=dtype, device=device))


@pytest.mark.parametrize("value", [1.0, -0.5, float("nan")])
@pytest.mark.parametrize("function", ["flash_attn_func", "flash_attn_qkvpacked_func", "flash_attn_kvpacked_func"])
def test_bad_dropout_p_names_it_in_every_function(function, value):
    q, k, v = qkv()
    calls = {
        "flash_attn_func": lambda **kw: flash_attn_func(q, k, v, **kw),
        "flash_attn_qkvpacked_func": lambda **kw: flash_attn_qkvpacked_func(torch.stack((q, k, v), dim=2), **kw),
        "flash_attn_kvpacked_func": lambda **kw: flash_attn_kvpacked_func(q, torch.stack((k, v), dim=2), **kw),
    }
    with pytest.raises(ValueError, match="dropout_p"):
        calls[function](dropout_p=value)
    calls[function](dropout_p=0.25)  # a valid one runs (test_dropout.py checks its numbers)


def test_default_options_are_accepted_as_lists():
    q, k, v = qkv()
    flash_attn_func(q, k, v, dropout_p=0.0, window_size=[-1, -1], softcap=0.0, alibi_slopes=None,
                    return_attn_probs=False)


def test_not_a_tensor():
    q, k, v = qkv()
    with pytest.raises(TypeError, match="k: expected a torch.Tensor"):
        flash_attn_func(q, k.numpy(), v)


@pytest.mark.parametrize("name", ["q", "k", "v"])
def test_wrong_rank(name):
    tensors = dict(zip("qkv", qkv()))
    tensors[name] = tensors[name].flatten(2)
    with pytest.raises(ValueError, match=f"{name}: expected a rank-4 tensor"):
        flash_attn_func(**tensors)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32])
def test_unsupported_dtype(dtype):
    q, k, v = (t.to(dtype) for t in qkv())
    with pytest.raises(ValueError, match="q: expected dtype torch.float16, torch.bfloat16 or"):
        flash_attn_func(q, k, v)


@pytest.mark.parametrize("name", ["k", "v"])
def test_mixed_dtypes(name):
    tensors = dict(zip("qkv", qkv()))
    tensors[name] = tensors[name].bfloat16()
    with pytest.raises(ValueError, match=f"{name}: expected dtype torch.float16 like q"):
        flash_attn_func(**tensors)


@pytest.mark.parametrize("name", ["k", "v"])
def test_mixed_devices(name):
    tensors = dict(zip("qkv", qkv()))
    tensors[name] = tensors[name].to("meta")
    with pytest.raises(ValueError, match=f"{name}: expected a tensor on cpu like q"):
        flash_attn_func(**tensors)


def test_unsupported_device():
    q, k, v = qkv(device="meta")
    with pytest.raises(ValueError, match="q: expected a CPU or CUDA tensor"):
        flash_attn_func(q, k, v)


@pytest.mark.parametrize("name", ["q", "k", "v"])
def test_non_contiguous_last_dim(name):
    tensors = dict(zip("qkv", qkv()))
    tensors[name] = tensors[name].transpose(2, 3).contiguous().transpose(2, 3)
    with pytest.raises(ValueError, match=f"{name}: the last dimension .* must be contiguous"):
        flash_attn_func(**tensors)


# Shape mismatches are rejected by the library itself; its message names the argument.
@pytest.mark.parametrize("sizes,tensor,match", [
    (dict(nheads=6, nheads_k=4), None, r"k: heads_q \(6\) must be a multiple of heads_kv \(4\)"),
    (dict(headdim=264), None, "q: head_dim must be at most 256"),
    (dict(seqlen_q=0), None, r"q: every dimension of .* must be at least 1, got shape \(2, 0, 4, 32\)"),
    (dict(batch=0), None, r"q: every dimension of .* must be at least 1, got shape \(0, 8, 4, 32\)"),
    ({}, ("k", lambda t: t[:1]), "k: batch 1 does not match q's batch 2"),
    ({}, ("k", lambda t: t[..., :16]), "k: head_dim 16 does not match q's head_dim 32"),
    ({}, ("v", lambda t: t[:, :5]), "v: expected shape"),
    ({}, ("v", lambda t: t[..., :16]), "v: expected shape"),
])
def test_shape_mismatch_named_by_the_library(sizes, tensor, match):
    tensors = dict(zip("qkv", qkv(**sizes)))
    if tensor is not None:
        name, change = tensor
        tensors[name] = change(tensors[name])
    with pytest.raises(ValueError, match=match):
        flash_attn_func(**tensors)


@pytest.mark.parametrize("scale", [math.inf, math.nan])
def test_non_finite_softmax_scale(scale):
    with pytest.raises(ValueError, match="softmax_scale: must be finite"):
        flash_attn_func(*qkv(), softmax_scale=scale)


def test_qkvpacked_bad_shapes():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="qkv: expected a rank-5 tensor"):
        flash_attn_qkvpacked_func(q)
    with pytest.raises(ValueError, match="qkv: dimension 2 must be 3"):
        flash_attn_qkvpacked_func(torch.stack((q, k), dim=2))
    with pytest.raises(TypeError, match="qkv: expected a torch.Tensor"):
        flash_attn_qkvpacked_func([q, k, v])


def test_kvpacked_bad_shapes():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="kv: expected a rank-5 tensor"):
        flash_attn_kvpacked_func(q, k)
    with pytest.raises(ValueError, match="kv: dimension 2 must be 2"):
        flash_attn_kvpacked_func(q, torch.stack((k, v, v), dim=2))


def test_errors_leave_no_graph_behind():
    """A rejected call raises before autograd records anything."""
    q, k, v = (t.requires_grad_() for t in qkv(headdim=264))
    with pytest.raises(ValueError):
        flash_attn_func(q, k, v)
    assert q.grad is None


@pytest.mark.parametrize("window_size,error", [
    (None, TypeError),
    (-1, TypeError),
    ("-1,-1", TypeError),
    ((-1,), ValueError),
    ((-1, -1, -1), ValueError),
    ((-1.0, -1), ValueError),
    ((True, -1), ValueError),
])
def test_bad_window_size_names_the_argument(window_size, error):
    with pytest.raises(error, match="window_size: expected a \\(left, right\\) pair of ints"):
        flash_attn_func(*qkv(), window_size=window_size)


@pytest.mark.parametrize("scale,error,match", [
    ("0.125", TypeError, "softmax_scale: expected a number or None, got str"),
    (True, TypeError, "softmax_scale: expected a number or None, got bool"),
    ([0.125], TypeError, "softmax_scale: expected a number or None, got list"),
    (torch.tensor([0.1, 0.2]), TypeError, r"softmax_scale: expected a number or a one-element real tensor, .*\(2,\)"),
    (torch.tensor(True), TypeError, "softmax_scale: expected a number or a one-element real tensor"),
    (torch.tensor(math.nan), ValueError, "softmax_scale: must be finite"),
    (-math.inf, ValueError, "softmax_scale: must be finite"),
])
def test_bad_softmax_scale_names_the_argument(scale, error, match):
    with pytest.raises(error, match=match):
        flash_attn_func(*qkv(), softmax_scale=scale)


def test_softmax_scale_as_a_one_element_tensor_is_its_value():
    q, k, v = qkv()
    expected = flash_attn_func(q, k, v, softmax_scale=0.25)
    torch.testing.assert_close(flash_attn_func(q, k, v, softmax_scale=torch.tensor([0.25])), expected, rtol=0, atol=0)
    torch.testing.assert_close(flash_attn_func(q, k, v, softmax_scale=1), flash_attn_func(q, k, v, softmax_scale=1.0),
                               rtol=0, atol=0)


def _double_backward_inputs():
    return tuple(t.requires_grad_() for t in qkv())


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_double_backward_is_refused_loudly():
    """create_graph=True would give gradients without a graph through flashcore's backward, so a
    second-order gradient would silently be wrong: it raises instead, naming the problem."""
    q, k, v = _double_backward_inputs()
    out = flash_attn_func(q, k, v, causal=True)
    with pytest.raises(RuntimeError, match="flashcore: double backward is not supported"):
        torch.autograd.grad(out.float().square().sum(), (q, k, v), create_graph=True)
    q, k, v = _double_backward_inputs()
    with pytest.raises(RuntimeError, match="flashcore: double backward is not supported"):
        flash_attn_func(q, k, v).float().square().sum().backward(create_graph=True)


def test_double_backward_is_refused_on_the_custom_op_route():
    """The torch.library op's autograd formula (compile, dispatch modes) refuses it the same way."""
    from flashcore._ops import attention_forward
    q, k, v = _double_backward_inputs()
    out, _ = attention_forward(q, k, v, 32 ** -0.5, False, False)
    with pytest.raises(RuntimeError, match="flashcore: double backward is not supported"):
        torch.autograd.grad(out.float().sum(), q, create_graph=True)


def test_first_order_gradients_still_work_after_a_refusal():
    q, k, v = _double_backward_inputs()
    flash_attn_func(q, k, v).float().sum().backward()
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in (q, k, v))


def test_argument_errors_are_value_and_runtime_errors():
    """flash_attn raises RuntimeError for bad arguments (its C++ checks), so drop-in callers catch
    that; flashcore's ArgumentError is both, from the Python checks and from the library's."""
    import flashcore
    assert issubclass(flashcore.ArgumentError, ValueError) and issubclass(flashcore.ArgumentError, RuntimeError)
    q, k, v = qkv()
    with pytest.raises(RuntimeError, match="window_size"):  # raised in Python
        flash_attn_func(q, k, v, window_size=(-2, -1))
    with pytest.raises(RuntimeError, match="k: head_dim 16 does not match"):  # raised by the library
        flash_attn_func(q, k[..., :16], v)
    with pytest.raises(flashcore.ArgumentError, match="q: expected dtype"):
        flash_attn_func(q.int(), k, v)
