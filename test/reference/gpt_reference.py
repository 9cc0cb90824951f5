#!/usr/bin/python3
"""The GPT model of runtime/model/gpt.h written independently in PyTorch (float64), for
test_gpt_model: reads a JSON description (config, parameter table, token batch) and the flat
float32 parameters, prints {"loss": L} and writes every parameter's gradient, flat float32, to
the output path. Usage: gpt_reference.py INPUT.json PARAMS.bin GRADS_OUT.bin
Follows GPT-NeoX's definitions: rotate-half rotary embedding on the first rotary-pct of each head,
sinusoidal [sin | cos] positions, RMSNorm as x * rsqrt(mean(x^2) + eps), ScaleNorm as
x / max(|x|, eps) * g, tanh GeLU, gated activations as x * f(gate) over the two halves of
dense_h_to_4h, grouped-query attention as [q | k | v] projections with each key/value head repeated
for its group of query heads, biases only where the parameter table has them, gpt-j residual as
x + attn(ln1 x) + mlp(ln2 x) (tied: both from ln1), sliding-window attention as flash-attention's
window_size (W, -1) (query i sees keys i - W..i), and NeoX's query/key norm: one module of shape
[heads, head size] applied to q and to k before rotary (LayerNorm over the whole query, RMSNorm and
ScaleNorm over each head). Negative targets are masked out of the loss as in NeoX. MoE layers
(config "moe": its layers, flavour and gating) route with moe_reference.py on the C++ side's
random draws (spec "moe_draws", per layer) and add moe-loss-coeff x l_aux to the loss that is
differentiated (DeepSpeed's gating); the printed loss is the language model's alone.
"""
import json
import math
import sys

import torch
import torch.nn.functional as F

import moe_reference


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
    KV = c.get("kv_heads", H)
    P = params

    def bias(name):  # an absent bias adds nothing
        return P[name] if name in P else 0.0

    def linear(x, prefix):
        return x @ P[prefix + ".weight"].T + bias(prefix + ".bias")

    def norm(x, prefix):
        w = P[prefix + ".weight"]
        if c["norm"] == "layernorm":
            return F.layer_norm(x, (h,), w, P.get(prefix + ".bias"), c["layernorm_eps"])
        if c["norm"] == "scalenorm":
            return x / x.norm(2, dim=-1, keepdim=True).clamp(min=c["scalenorm_eps"]) * w
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c["rms_eps"]) * w

    def gelu(x):
        return F.gelu(x, approximate="tanh")

    units = {"gelu": gelu, "geglu": gelu, "relu": F.relu, "reglu": F.relu, "silu": F.silu,
             "swiglu": F.silu, "glu": torch.sigmoid, "bilinear": lambda t: t,
             "softsign": F.softsign, "mish": lambda t: t * torch.tanh(F.softplus(t))}
    gated = c["activation"] in ("geglu", "reglu", "swiglu", "glu", "bilinear")

    def mlp(t, prefix, is_gated):
        f = linear(t, prefix + "dense_h_to_4h")
        unit = units[c["activation"]]
        if is_gated:
            value, gate = f.chunk(2, dim=-1)
            f = value * unit(gate)
        else:
            f = unit(f)
        return linear(f, prefix + "dense_4h_to_h")

    def moe_layer(t, prefix, m, draws):  # t: [N, h]
        N = t.shape[0]
        E = m["experts"]
        router_in = t
        if "jitter" in draws:
            router_in = t * torch.tensor(draws["jitter"], dtype=torch.float64).view(N, h)
        logits = router_in @ P[prefix + "router.weight"].T
        if m["kind"] == "dropless":
            weights, experts = moe_reference.route_dropless(logits, m["k"], m["router"],
                                                            m["training"])
            l_aux = 0.0
        else:
            def draw(name):
                return (torch.tensor(draws[name], dtype=torch.float64).view(N, E)
                        if name in draws else None)
            g = moe_reference.gate_deepspeed(logits, m["k"], m["capacity_factor"],
                                             m["min_capacity"], m["drop_tokens"], draw("rts"),
                                             draw("rsample"), draw("second"))
            weights, experts, l_aux = g["weights"], g["experts"], g["l_aux"]
        expert_gated = gated and m["kind"] == "deepspeed"
        out = torch.zeros_like(t)
        for e in range(E):
            rows, j = torch.nonzero(experts == e, as_tuple=True)
            if rows.numel() == 0:
                continue
            y = mlp(t[rows], prefix + "experts." + str(e) + ".", expert_gated)
            out = out.index_add(0, rows, y * weights[rows, j].unsqueeze(1))
        if prefix + "coefficient.weight" in P:
            coef = torch.softmax(linear(t, prefix + "coefficient"), dim=-1)
            out = out * coef[:, 0:1] + mlp(t, prefix + "mlp.", gated) * coef[:, 1:2]
        return out, l_aux

    aux_loss = 0.0
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

    def qk_norm(t, prefix):  # t: (B, T, H, d); NeoX's norm([H, d])
        w = P[prefix + ".weight"]
        if c["norm"] == "layernorm":
            return F.layer_norm(t, (H, d), w, P[prefix + ".bias"], c["layernorm_eps"])
        if c["norm"] == "scalenorm":
            return t / t.norm(2, dim=-1, keepdim=True).clamp(min=c["scalenorm_eps"]) * w
        rms = t.norm(2, dim=-1, keepdim=True) * d ** -0.5
        return t / (rms + c["rms_eps"]) * w

    i_pos = torch.arange(T).view(T, 1)
    j_pos = torch.arange(T).view(1, T)
    mask = j_pos <= i_pos
    if c.get("sliding_window") is not None:
        mask = mask & (i_pos - j_pos <= c["sliding_window"])
    for l in range(L):
        p = "layers.%d." % l
        a = norm(x, p + "input_layernorm")
        qkv = linear(a, p + "attention.query_key_value")
        q, k, v = qkv.split([h, KV * d, KV * d], dim=-1)
        q = q.reshape(B, T, H, d)
        k = k.reshape(B, T, KV, d)
        if c.get("qk_norm"):
            q, k = qk_norm(q, p + "attention.qk_layernorm"), qk_norm(k, p + "attention.qk_layernorm")
        q = q.transpose(1, 2)
        k, v = (t.transpose(1, 2).repeat_interleave(H // KV, dim=1)
                for t in (k, v.reshape(B, T, KV, d)))
        q, k = rotate(q), rotate(k)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)
        probs = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        ctx = (probs @ v).transpose(1, 2).reshape(B, T, h)
        attn = linear(ctx, p + "attention.dense")
        mlp_in = x if c["gptj_residual"] else x + attn
        mlp_normed = a if c.get("gptj_tied") else norm(mlp_in, p + "post_attention_layernorm")
        moe = c.get("moe")
        if moe and l in moe["layers"]:
            out, l_aux = moe_layer(mlp_normed.reshape(B * T, h), p + "mlp.", moe,
                                   spec["moe_draws"][str(l)])
            out = out.view(B, T, h)
            aux_loss = aux_loss + l_aux
        else:
            out = mlp(mlp_normed, p + "mlp.", gated)
        x = x + attn + out if c["gptj_residual"] else mlp_in + out

    xf = norm(x, "final_layer_norm")
    w = P["embed.word_embeddings.weight"] if c["tied"] else P["embed_out.weight"]
    logits = xf @ w.T
    # NeoX's masked loss (megatron/model/gpt2_model.py cross_entropy): a negative target (label
    # -100) is out of the loss, which is sum(loss * mask) / mask.sum() over the batch.
    flat_targets = targets.reshape(-1)
    mask = (flat_targets >= 0).double()
    losses = F.cross_entropy(logits.reshape(B * T, -1), flat_targets.clamp(min=0),
                             reduction="none")
    loss = (losses * mask).sum() / mask.sum()
    moe = c.get("moe")
    total = loss + (moe["loss_coeff"] * aux_loss if moe and moe["kind"] == "deepspeed" else 0.0)
    total.backward()

    grads = torch.zeros_like(flat)
    for p in spec["parameters"]:
        g = params[p["name"]].grad
        if g is not None:
            grads[p["offset"]:p["offset"] + p["numel"]] = g.reshape(-1).float()
    open(sys.argv[3], "wb").write(grads.numpy().tobytes())
    print(json.dumps({"loss": loss.item(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
