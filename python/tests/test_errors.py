"""Every bad input gets a clear exception naming the argument, before anything runs; options
flashcore does not implement raise NotImplementedError naming the option."""

import math

import pytest
import torch

from flashcore import flash_attn_func, flash_attn_kvpacked_func, flash_attn_qkvpacked_func


def qkv(device="cpu", dtype=torch.float16, batch=2, seqlen_q=8, seqlen_k=8, nheads=4, nheads_k=4, headdim=32):
    return (torch.randn(batch, seqlen_q, nheads, headdim, dtype=dtype, device=device),
            torch.randn(batch, seqlen_k, nheads_k, headdim, dtype=dtype, device=device),
            torch.randn(batch, seqlen_k, nheads_k, headdim, dtype=dtype, device=device))


@pytest.mark.parametrize("option,value", [
    ("dropout_p", 0.1),
    ("window_size", (16, 0)),
    ("softcap", 30.0),
    ("alibi_slopes", torch.ones(4)),
    ("return_attn_probs", True),
])
@pytest.mark.parametrize("function", ["flash_attn_func", "flash_attn_qkvpacked_func", "flash_attn_kvpacked_func"])
def test_unsupported_options_name_the_option(function, option, value):
    q, k, v = qkv()
    calls = {
        "flash_attn_func": lambda **kw: flash_attn_func(q, k, v, **kw),
        "flash_attn_qkvpacked_func": lambda **kw: flash_attn_qkvpacked_func(torch.stack((q, k, v), dim=2), **kw),
        "flash_attn_kvpacked_func": lambda **kw: flash_attn_kvpacked_func(q, torch.stack((k, v), dim=2), **kw),
    }
    with pytest.raises(NotImplementedError, match=option):
        calls[function](**{option: value})


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


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32])
def test_unsupported_dtype(dtype):
    q, k, v = (t.to(dtype) for t in qkv())
    with pytest.raises(ValueError, match="q: expected dtype torch.float16 or torch.bfloat16"):
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
