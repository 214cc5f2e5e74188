"""What only CUDA tensors have: PyTorch's current stream, a device mix, and the GPU a tensor lives
on. (The accuracy checks run on CUDA through the `device` fixture of the other files.)"""

import pytest
import torch

import flashcore
from conftest import requires_cuda, requires_cuda_build
from flashcore import flash_attn_func

pytestmark = requires_cuda


def inputs(device="cuda", requires_grad=False):
    return [torch.randn(2, 100, 4, 64, dtype=torch.float16, device=device, requires_grad=requires_grad)
            for _ in range(3)]


@requires_cuda_build
def test_runs_on_the_current_stream():
    q, k, v = inputs(requires_grad=True)
    expected = flash_attn_func(q, k, v, causal=True)
    expected_grads = torch.autograd.grad(expected.sum(), (q, k, v))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = flash_attn_func(q, k, v, causal=True)
        grads = torch.autograd.grad(out.sum(), (q, k, v))
    torch.cuda.current_stream().wait_stream(side)
    assert torch.equal(out, expected)
    for a, b in zip(grads, expected_grads):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("name", ["k", "v"])
def test_cpu_and_cuda_mixed(name):
    tensors = dict(zip("qkv", inputs()))
    tensors[name] = tensors[name].cpu()
    with pytest.raises(ValueError, match=f"{name}: expected a tensor on cuda:0 like q, got one on cpu"):
        flash_attn_func(**tensors)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_two_gpus_mixed():
    q, k, v = inputs()
    with pytest.raises(ValueError, match="k: expected a tensor on cuda:0 like q, got one on cuda:1"):
        flash_attn_func(q, k.to("cuda:1"), v)


@requires_cuda_build
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_runs_on_the_tensors_gpu():
    """Tensors on cuda:1 while cuda:0 is current: the call switches device for the launch."""
    q, k, v = inputs("cuda:1")
    expected = flash_attn_func(*(t.cpu() for t in (q, k, v)))
    assert torch.cuda.current_device() == 0
    out = flash_attn_func(q, k, v)
    assert out.device == q.device
    torch.testing.assert_close(out.cpu(), expected, atol=2e-3, rtol=0)


@pytest.mark.skipif(flashcore.built_with_cuda(), reason="this build has the CUDA backend")
def test_cuda_tensors_without_cuda_build():
    with pytest.raises(NotImplementedError, match="without CUDA"):
        flash_attn_func(*inputs())
