#!/usr/bin/python3
"""bench_gpt's baseline: the same GPT (learned positions, LayerNorm, tanh GeLU, tied output) as
plain PyTorch eager modules, trained with torch.optim.AdamW in fp32 on random tokens.
Usage: torch_gpt_bench.py LAYERS HIDDEN HEADS SEQ VOCAB BATCH STEPS THREADS [ATTN_P HIDDEN_P]
(VOCAB: our padded one; the dropouts at our sites: attention probabilities, the embeddings and each
block's attention and MLP outputs)
Prints one JSON line: {"tokens_per_s": X, "loss": L}.
DS_TORCH_DEVICE=cuda runs it on the GPU (scripts/gpu-check, beside bench_cuda_gpt): attention
through scaled_dot_product_attention, what eager PyTorch users run there, AdamW fused, timed after
a synchronize; DS_TORCH_COMPILE=1 times the torch.compile'd model instead (its compilation in the
warm-up steps)."""
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, h, heads, attn_p, hidden_p):
        super().__init__()
        self.heads = heads
        self.attn_p, self.hidden_p = attn_p, hidden_p
        self.ln1 = nn.LayerNorm(h)
        self.qkv = nn.Linear(h, 3 * h)
        self.dense = nn.Linear(h, h)
        self.ln2 = nn.LayerNorm(h)
        self.fc1 = nn.Linear(h, 4 * h)
        self.fc2 = nn.Linear(4 * h, h)

    def forward(self, x, mask):
        B, T, h = x.shape
        d = h // self.heads
        q, k, v = (t.reshape(B, T, self.heads, d).transpose(1, 2)
                   for t in self.qkv(self.ln1(x)).split(h, dim=-1))
        if x.is_cuda:
            ctx = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_p, is_causal=True)
        else:
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)
            p = F.dropout(scores.masked_fill(mask, float("-inf")).softmax(dim=-1), self.attn_p)
            ctx = p @ v
        x = x + F.dropout(self.dense(ctx.transpose(1, 2).reshape(B, T, h)), self.hidden_p)
        return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh")),
                             self.hidden_p)


class Gpt(nn.Module):
    def __init__(self, layers, h, heads, seq, vocab, attn_p, hidden_p):
        super().__init__()
        self.hidden_p = hidden_p
        self.wte = nn.Embedding(vocab, h)
        self.wpe = nn.Embedding(seq, h)
        self.blocks = nn.ModuleList(Block(h, heads, attn_p, hidden_p) for _ in range(layers))
        self.ln = nn.LayerNorm(h)

    def forward(self, ids, targets):
        T = ids.shape[1]
        x = F.dropout(self.wte(ids) + self.wpe.weight[:T], self.hidden_p)
        mask = ~torch.ones(T, T, dtype=torch.bool, device=ids.device).tril()
        for b in self.blocks:
            x = b(x, mask)
        logits = self.ln(x) @ self.wte.weight.T
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    layers, h, heads, seq, vocab, batch, steps, threads = map(int, sys.argv[1:9])
    attn_p, hidden_p = (float(a) for a in (sys.argv[9:11] + ["0", "0"])[:2])
    device = os.environ.get("DS_TORCH_DEVICE", "cpu")
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = Gpt(layers, h, heads, seq, vocab, attn_p, hidden_p).to(device)
    cuda = device == "cuda"
    fused = {"fused": True} if cuda else {}  # PyTorch 1.13's AdamW (Debian's) has no such flag
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, **fused)
    run = torch.compile(model) if os.environ.get("DS_TORCH_COMPILE") == "1" else model
    ids = torch.randint(0, vocab, (batch, seq), device=device)
    targets = torch.randint(0, vocab, (batch, seq), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = run(ids, targets)
        loss.backward()
        opt.step()
        return loss

    for _ in range(2):
        step()
    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        loss = step()
    loss = loss.item()  # waits for the GPU
    seconds = time.perf_counter() - start
    print(json.dumps({"tokens_per_s": batch * seq * steps / seconds, "loss": loss}))


if __name__ == "__main__":
    main()
