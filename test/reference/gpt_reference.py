#!/usr/bin/python3
"""The GPT model of runtime/model/gpt.h written independently in PyTorch (float64), for
test_gpt_model: reads a JSON description (config, parameter table, token batch) and the flat
float32 parameters, prints {"loss": L} and writes every parameter's gradient, flat float32, to
the output path. Usage: gpt_reference.py INPUT.json PARAMS.bin GRADS_OUT.bin
Follows GPT-NeoX's definitions: rotate-half rotary embedding on the first rotary-pct of each head,
sinusoidal [sin | cos] positions, RMSNorm with eps outside the root, tanh GeLU, GeGLU as
x * gelu(gate) over the two halves of dense_h_to_4h, gpt-j residual as x + attn(ln1 x) + mlp(ln2 x).
"""
import json
import math
import sys

import torch
import torch.nn.functional as F


def main():
    spec = json.load(open(sys.argv[1]))
    flat = torch.frombuffer(bytearray(open(sys.argv[2], "rb").read()), dtype=torch.float32)
    c = spec["config"]
    params = {}
    for p in spec["parameters"]:
        t = flat[p["offset"]:p["offset"] + p["numel"]].clone().double().view(p["shape"])
        params[p["name"]] = t.requires_grad_(True)

    B, T = spec["samples"], spec["seq"]
    ids = torch.tensor(spec["input_ids"], dtype=torch.long).view(B, T)
    targets = torch.tensor(spec["target_ids"], dtype=torch.long).view(B, T)
    h, H, L = c["hidden"], c["heads"], c["layers"]
    d = h // H
    P = params

    def norm(x, prefix):
        w = P[prefix + ".weight"]
        if c["norm"] == "layernorm":
            return F.layer_norm(x, (h,), w, P[prefix + ".bias"], c["layernorm_eps"])
        rms = x.norm(2, dim=-1, keepdim=True) * h ** -0.5
        return x / (rms + c["rms_eps"]) * w

    def gelu(x):
        return F.gelu(x, approximate="tanh")

    positions = torch.arange(T, dtype=torch.float64)
    x = P["embed.word_embeddings.weight"][ids]
    if c["pos_emb"] == "learned":
        x = x + P["embed.position_embeddings.weight"][:T]
    elif c["pos_emb"] == "sinusoidal":
        inv = 1.0 / (10000 ** (torch.arange(0, h, 2, dtype=torch.float64) / h))
        angles = torch.outer(positions, inv)
        x = x + torch.cat([angles.sin(), angles.cos()], dim=-1)

    rot = c["rotary_dim"]
    if c["pos_emb"] == "rotary":
        inv = 1.0 / (c["rotary_base"] ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
        angles = torch.outer(positions, inv)
        emb = torch.cat([angles, angles], dim=-1)
        cos, sin = emb.cos(), emb.sin()

    def rotate(t):  # t: (B, H, T, d)
        if c["pos_emb"] != "rotary":
            return t
        r, rest = t[..., :rot], t[..., rot:]
        half = rot // 2
        rotated = torch.cat([-r[..., half:], r[..., :half]], dim=-1)
        return torch.cat([r * cos + rotated * sin, rest], dim=-1)

    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(L):
        p = "layers.%d." % l
        a = norm(x, p + "input_layernorm")
        qkv = a @ P[p + "attention.query_key_value.weight"].T + P[p + "attention.query_key_value.bias"]
        q, k, v = (t.reshape(B, T, H, d).transpose(1, 2) for t in qkv.split(h, dim=-1))
        q, k = rotate(q), rotate(k)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)
        probs = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        ctx = (probs @ v).transpose(1, 2).reshape(B, T, h)
        attn = ctx @ P[p + "attention.dense.weight"].T + P[p + "attention.dense.bias"]
        mlp_in = x if c["gptj_residual"] else x + attn
        f = norm(mlp_in, p + "post_attention_layernorm") @ P[p + "mlp.dense_h_to_4h.weight"].T
        f = f + P[p + "mlp.dense_h_to_4h.bias"]
        if c["activation"] == "geglu":
            value, gate = f.chunk(2, dim=-1)
            f = value * gelu(gate)
        else:
            f = gelu(f)
        out = f @ P[p + "mlp.dense_4h_to_h.weight"].T + P[p + "mlp.dense_4h_to_h.bias"]
        x = x + attn + out if c["gptj_residual"] else mlp_in + out

    xf = norm(x, "final_layer_norm")
    w = P["embed.word_embeddings.weight"] if c["tied"] else P["embed_out.weight"]
    logits = xf @ w.T
    loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1))
    loss.backward()

    grads = torch.zeros_like(flat)
    for p in spec["parameters"]:
        g = params[p["name"]].grad
        if g is not None:
            grads[p["offset"]:p["offset"] + p["numel"]] = g.reshape(-1).float()
    open(sys.argv[3], "wb").write(grads.numpy().tobytes())
    print(json.dumps({"loss": loss.item(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
