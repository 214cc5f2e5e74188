"""A short training run with flashcore's varlen + sliding window + dropout attention, and its SDPA
twin: the same model, data and initial weights, with torch's scaled_dot_product_attention given the
same masking as an explicit mask over the packed tokens (same document, causal, within the window)
and the same dropout_p. Dropout masks differ between the two (each draws its own random bits), so
the curves can only match within noise; the noise band is measured by training the twin twice with
two dropout seeds.

The model is the pre-norm block of test_against_sdpa.py (embedding, one block, output layer) on
packed documents. The task needs attention: each document draws its tokens from its own small
random topic, so the next token is predictable only from the document's earlier tokens (within
the window, which is shorter than the longest documents). Used by test_training_twin.py (short, CPU and CUDA) and by
scripts/train_compare.py (a few hundred steps on a GPU, curves to JSON)."""

import math

import torch
import torch.nn.functional as F

from flashcore import flash_attn_varlen_func

VOCAB = 64
DIM = 128
HEADS = 2


def make_batches(steps, docs_per_step, max_len, seed, topic_size=4):
    """Per step: packed tokens (total,) int64 and cu_seqlens (docs + 1,) int32. Each document has
    8..max_len tokens drawn uniformly from its own random "topic" of topic_size tokens, so a token
    is predictable (loss log(topic_size) instead of log(VOCAB)) only from the earlier tokens of the
    same document: attention has to learn to look back within the document, and tokens of other
    documents (which varlen keeps out) would mislead it."""
    gen = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(steps):
        docs = []
        for _ in range(docs_per_step):
            length = int(torch.randint(8, max_len + 1, (1,), generator=gen))
            topic = torch.randperm(VOCAB, generator=gen)[:topic_size]
            docs.append(topic[torch.randint(0, topic_size, (length,), generator=gen)])
        lengths = torch.tensor([len(d) for d in docs])
        cu = torch.zeros(len(docs) + 1, dtype=torch.int32)
        cu[1:] = torch.cumsum(lengths, 0)
        batches.append((torch.cat(docs), cu))
    return batches


def allowed_mask(cu, window_left, device):
    """(total, total) bool, True where query i may attend key j: same document, j <= i (causal),
    i - j <= window_left. Per document q and k have the same length, so flash_attn's bottom-right
    alignment is the diagonal."""
    total = int(cu[-1])
    doc = torch.repeat_interleave(torch.arange(len(cu) - 1, device=cu.device), (cu[1:] - cu[:-1]).long()).to(device)
    i = torch.arange(total, device=device)
    same_doc = doc[:, None] == doc[None, :]
    distance = i[:, None] - i[None, :]
    return same_doc & (distance >= 0) & (distance <= window_left)


class PackedBlock(torch.nn.Module):
    """test_against_sdpa.py's pre-norm block over packed tokens x: (total, dim)."""

    def __init__(self, attention):
        super().__init__()
        self.attention = attention
        self.norm1, self.norm2 = torch.nn.LayerNorm(DIM), torch.nn.LayerNorm(DIM)
        self.qkv, self.proj = torch.nn.Linear(DIM, 3 * DIM), torch.nn.Linear(DIM, DIM)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(DIM, 4 * DIM), torch.nn.GELU(), torch.nn.Linear(4 * DIM, DIM))

    def forward(self, x, cu, max_seqlen):
        total = x.shape[0]
        q, k, v = self.qkv(self.norm1(x)).view(total, 3, HEADS, DIM // HEADS).unbind(dim=1)
        x = x + self.proj(self.attention(q, k, v, cu, max_seqlen).reshape(total, DIM))
        return x + self.mlp(self.norm2(x))


def flashcore_attention(dropout_p, window_left):
    def attention(q, k, v, cu, max_seqlen):
        return flash_attn_varlen_func(q, k, v, cu, cu, max_seqlen, max_seqlen, dropout_p=dropout_p, causal=True,
                                      window_size=(window_left, 0))
    return attention


def sdpa_attention(dropout_p, window_left):
    def attention(q, k, v, cu, max_seqlen):
        mask = allowed_mask(cu, window_left, q.device)
        # (total, heads, d) -> (1, heads, total, d): the packed tokens as one sequence under the mask.
        q, k, v = (t.transpose(0, 1).unsqueeze(0) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        return out.squeeze(0).transpose(0, 1)
    return attention


def train(attention, device, batches, dropout_seed, init_seed=1, lr=2e-3):
    """Loss per step. init_seed fixes the weights (the same for every run); dropout_seed seeds
    torch's generators afterwards, i.e. the dropout draws."""
    torch.manual_seed(init_seed)
    block = PackedBlock(attention)
    model = torch.nn.ModuleDict(dict(embed=torch.nn.Embedding(VOCAB, DIM), block=block, out=torch.nn.Linear(DIM, VOCAB)))
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    torch.manual_seed(dropout_seed)
    autocast = torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)
    losses = []
    for tokens, cu in batches:
        tokens, cu = tokens.to(device), cu.to(device)
        max_seqlen = int((cu[1:] - cu[:-1]).max())
        with autocast:
            x = model["embed"](tokens)
            logits = model["out"](model["block"](x, cu, max_seqlen))
        # Next-token loss within each document (the last token of a document predicts nothing).
        keep = torch.ones(tokens.shape[0], dtype=torch.bool, device=device)
        keep[(cu[1:] - 1).long()] = False
        target = torch.roll(tokens, -1)
        loss = F.cross_entropy(logits.float()[keep], target[keep])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def block_means(losses, block):
    return [sum(losses[i:i + block]) / len(losses[i:i + block]) for i in range(0, len(losses), block)]


def compare(device, steps, docs_per_step=8, max_len=64, window_left=32, dropout_p=0.1, block=25, data_seed=7):
    """Trains flashcore (dropout seed 100), the SDPA twin (seeds 100 and 200); returns the curves and
    the block-mean differences: flashcore vs twin, and twin vs twin (the noise band)."""
    batches = make_batches(steps, docs_per_step, max_len, data_seed)
    flash = train(flashcore_attention(dropout_p, window_left), device, batches, dropout_seed=100)
    twin_a = train(sdpa_attention(dropout_p, window_left), device, batches, dropout_seed=100)
    twin_b = train(sdpa_attention(dropout_p, window_left), device, batches, dropout_seed=200)
    means = {name: block_means(curve, block) for name, curve in (("flash", flash), ("twin_a", twin_a), ("twin_b", twin_b))}
    diff_flash = max(abs(a - b) for a, b in zip(means["flash"], means["twin_a"]))
    diff_flash_b = max(abs(a - b) for a, b in zip(means["flash"], means["twin_b"]))
    noise = max(abs(a - b) for a, b in zip(means["twin_a"], means["twin_b"]))
    return dict(
        config=dict(steps=steps, docs_per_step=docs_per_step, max_len=max_len, topic_size=4, window_left=window_left,
                    dropout_p=dropout_p, block=block, data_seed=data_seed, vocab=VOCAB, dim=DIM, heads=HEADS,
                    init_seed=1, dropout_seeds=dict(flash=100, twin_a=100, twin_b=200), autocast="bfloat16",
                    uniform_loss=math.log(VOCAB), topic_loss=math.log(4)),
        losses=dict(flash=flash, twin_a=twin_a, twin_b=twin_b),
        block_means=means,
        max_block_diff=dict(flash_vs_twin_a=diff_flash, flash_vs_twin_b=diff_flash_b, twin_a_vs_twin_b=noise),
    )
