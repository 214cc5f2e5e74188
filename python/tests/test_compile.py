"""torch.compile(fullgraph=True) traces through flashcore's custom ops (no graph break), the
compiled model matches eager, and its backward runs the library's backward op. opcheck validates
the ops' registration (schema, fake implementations, autograd)."""

import pytest
import torch

from flashcore import flash_attn_func, flash_attn_qkvpacked_func


class SelfAttention(torch.nn.Module):
    def __init__(self, dim, nheads, causal, packed):
        super().__init__()
        self.nheads, self.causal, self.packed = nheads, causal, packed
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x):
        batch, seqlen, dim = x.shape
        qkv = self.qkv(x).view(batch, seqlen, 3, self.nheads, dim // self.nheads).to(torch.bfloat16)
        if self.packed:
            out = flash_attn_qkvpacked_func(qkv, causal=self.causal)
        else:
            q, k, v = qkv.unbind(dim=2)
            out = flash_attn_func(q, k, v, causal=self.causal)
        return self.proj(out.float().reshape(batch, seqlen, dim))


@pytest.mark.parametrize("packed", [False, True], ids=["unpacked", "qkvpacked"])
def test_compiled_model_matches_eager(device, packed):
    torch._dynamo.reset()
    model = SelfAttention(dim=64, nheads=4, causal=True, packed=packed).to(device)
    x = torch.randn(2, 24, 64, device=device)
    compiled = torch.compile(model, fullgraph=True)

    eager_out = model(x)
    eager_out.square().mean().backward()
    eager_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()

    compiled_out = compiled(x)
    compiled_out.square().mean().backward()
    torch.testing.assert_close(compiled_out, eager_out, atol=2e-2, rtol=2e-2)
    for got, want in zip((p.grad for p in model.parameters()), eager_grads):
        torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)


def test_compiled_graph_calls_the_library_ops(device):
    """The traced forward and backward graphs contain flashcore's ops (so the library's backward
    pass, not a decomposition, computes the gradients)."""
    torch._dynamo.reset()
    seen = []

    def backend(graph_module, example_inputs):
        from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func

        def record(gm, _):
            seen.extend(str(node.target) for node in gm.graph.nodes if node.op == "call_function")
            return make_boxed_func(gm.forward)

        return aot_module_simplified(graph_module, example_inputs, fw_compiler=record, bw_compiler=record)

    q, k, v = (torch.randn(1, 16, 2, 32, dtype=torch.float16, device=device, requires_grad=True) for _ in range(3))
    fn = torch.compile(lambda q, k, v: flash_attn_func(q, k, v, causal=True), backend=backend, fullgraph=True)
    fn(q, k, v).sum().backward()
    assert any("flashcore.attention_forward" in target for target in seen), seen
    assert any("flashcore.attention_backward" in target for target in seen), seen


def test_opcheck(device):
    q = torch.randn(2, 9, 4, 32, dtype=torch.float16, device=device, requires_grad=True)
    k = torch.randn(2, 12, 2, 32, dtype=torch.float16, device=device, requires_grad=True)
    v = torch.randn(2, 12, 2, 32, dtype=torch.float16, device=device, requires_grad=True)
    torch.library.opcheck(torch.ops.flashcore.attention_forward.default, (q, k, v, 0.2, True, False))
    out, lse = torch.ops.flashcore.attention_forward(q.detach(), k.detach(), v.detach(), 0.2, True, False)
    dout = torch.randn_like(out)
    torch.library.opcheck(torch.ops.flashcore.attention_backward.default,
                          (dout, q.detach(), k.detach(), v.detach(), out, lse, 0.2, True, False))


def test_fake_tensor_mode_takes_the_custom_op():
    """Outside torch.compile too, a dispatch mode (here FakeTensorMode, as used for shape
    propagation and memory planning) gets the custom op's fake implementation, not a C call on
    memory that does not exist."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty(2, 7, 4, 32, dtype=torch.bfloat16)
        k = torch.empty(2, 9, 2, 32, dtype=torch.bfloat16)
        out = flash_attn_func(q, k, k, causal=True)
    assert out.shape == (2, 7, 4, 32) and out.dtype == torch.bfloat16
