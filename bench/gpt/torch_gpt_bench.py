#!/usr/bin/python3
"""bench_gpt's baseline: the same GPT (learned positions, LayerNorm, tanh GeLU, tied output) as
plain PyTorch eager modules, trained with torch.optim.AdamW in fp32 on random tokens.
Usage: torch_gpt_bench.py LAYERS HIDDEN HEADS SEQ VOCAB BATCH STEPS THREADS (VOCAB: our padded one)
Prints one JSON line: {"tokens_per_s": X, "loss": L}."""
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, h, heads):
        super().__init__()
        self.heads = heads
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
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)
        p = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)
        x = x + self.dense((p @ v).transpose(1, 2).reshape(B, T, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, layers, h, heads, seq, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, h)
        self.wpe = nn.Embedding(seq, h)
        self.blocks = nn.ModuleList(Block(h, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(h)

    def forward(self, ids, targets):
        T = ids.shape[1]
        x = self.wte(ids) + self.wpe.weight[:T]
        mask = ~torch.ones(T, T, dtype=torch.bool).tril()
        for b in self.blocks:
            x = b(x, mask)
        logits = self.ln(x) @ self.wte.weight.T
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    layers, h, heads, seq, vocab, batch, steps, threads = map(int, sys.argv[1:9])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = Gpt(layers, h, heads, seq, vocab)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    ids = torch.randint(0, vocab, (batch, seq))
    targets = torch.randint(0, vocab, (batch, seq))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(ids, targets)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(2):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        loss = step()
    seconds = time.perf_counter() - start
    print(json.dumps({"tokens_per_s": batch * seq * steps / seconds, "loss": loss}))


if __name__ == "__main__":
    main()
