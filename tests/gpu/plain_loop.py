"""The baseline for train-ref on a GPU: the same LLaMA-style model (shapes
of a skipswarm --model preset, byte vocabulary, tied embeddings) trained
with a plain PyTorch loop (AdamW, fp32 weights, optional bf16 autocast) on
random tokens. Prints one JSON line: tokens/s, MFU, peak memory.

  python3 plain_loop.py --layers 24 --d_model 1024 --heads 16 --ffn 2816 \
      --seq_len 1024 --samples_per_mb 8 --iterations 30 [--bf16]
"""
import argparse
import json
import math
import time

import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, d, h, f):
        super().__init__()
        self.h = h
        self.attn_norm = torch.nn.Parameter(torch.ones(d))
        self.mlp_norm = torch.nn.Parameter(torch.ones(d))
        self.wq = torch.nn.Linear(d, d, bias=False)
        self.wk = torch.nn.Linear(d, d, bias=False)
        self.wv = torch.nn.Linear(d, d, bias=False)
        self.wo = torch.nn.Linear(d, d, bias=False)
        self.gate = torch.nn.Linear(d, f, bias=False)
        self.up = torch.nn.Linear(d, f, bias=False)
        self.down = torch.nn.Linear(f, d, bias=False)

    @staticmethod
    def norm(x, w):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(x.dtype) * w

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        n = self.norm(x, self.attn_norm)
        q, k, v = (w(n).view(b, t, self.h, -1).transpose(1, 2) for w in (self.wq, self.wk, self.wv))

        def rot(z):
            z1, z2 = z.chunk(2, -1)
            return torch.cat([z1 * cos - z2 * sin, z1 * sin + z2 * cos], -1)

        # The same explicit attention as model/layers.cc (no fused kernel),
        # so the comparison measures the framework around it.
        q, k = rot(q), rot(k)
        s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1),
                          float("-inf"))
        a = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.wo(a)
        n = self.norm(x, self.mlp_norm)
        return x + self.down(F.silu(self.gate(n)) * self.up(n))


def main():
    ap = argparse.ArgumentParser()
    for name, default in [("layers", 12), ("d_model", 768), ("heads", 12), ("ffn", 2048),
                          ("seq_len", 1024), ("samples_per_mb", 8), ("iterations", 30),
                          ("mbs_per_iteration", 2), ("warmup", 5)]:
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--peak_tflops", type=float, default=989.0)  # H200 dense bf16
    a = ap.parse_args()
    dev = "cuda"
    torch.manual_seed(0)
    d, h, t, v = a.d_model, a.heads, a.seq_len, 256
    emb = torch.nn.Embedding(v, d).to(dev)
    blocks = torch.nn.ModuleList([Block(d, h, a.ffn) for _ in range(a.layers)]).to(dev)
    final = torch.nn.Parameter(torch.ones(d, device=dev))
    params = list(emb.parameters()) + list(blocks.parameters()) + [final]
    n_params = sum(p.numel() for p in params)
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.1)
    half = d // h // 2
    inv = 10000.0 ** (-torch.arange(half, dtype=torch.float64) / half)
    ang = torch.outer(torch.arange(t, dtype=torch.float64), inv)
    cos, sin = ang.cos().float().to(dev), ang.sin().float().to(dev)

    def step():
        for _ in range(a.mbs_per_iteration):
            tok = torch.randint(v, (a.samples_per_mb, t + 1), device=dev)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.bf16):
                x = emb(tok[:, :-1])
                for blk in blocks:
                    x = blk(x, cos, sin)
                logits = F.linear(Block.norm(x, final), emb.weight)
                loss = F.cross_entropy(logits.float().view(-1, v), tok[:, 1:].reshape(-1))
            loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = time.time()
    for _ in range(a.iterations):
        step()
    torch.cuda.synchronize()
    secs = time.time() - start
    tokens = a.iterations * a.mbs_per_iteration * a.samples_per_mb * t
    tps = tokens / secs
    flops_per_token = 6 * n_params + 12 * a.layers * d * t  # matmuls + attention
    print(json.dumps({
        "what": "plain_pytorch_loop", "params": n_params, "bf16": a.bf16,
        "tokens_per_s": tps, "mfu": tps * flops_per_token / (a.peak_tflops * 1e12),
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(), "seconds": secs}))


if __name__ == "__main__":
    main()
