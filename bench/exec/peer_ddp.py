#!/usr/bin/python3
"""Peer for bench/exec: the same GPT-2 trained with PyTorch's own
DistributedDataParallel on Gloo (Debian's python3-torch), for a side-by-side
tokens/s comparison with dptwin-exec's `dps`.

Same model as exec/gpt2_model.cpp (HuggingFace GPT-2 layout: Conv1D weights
(in, out), tied lm_head, causal-mask buffers), same init, AdamW with the same
decay groups, clipping to 1.0, DDP with 25 MiB buckets (first 1 MiB) and
broadcast_buffers, micro-batch per rank and threads per rank as given.

Usage (spawns the ranks itself):
  peer_ddp.py --np 2 --threads 1 --n-layer 12 --n-embd 768 --n-head 12 \
      --n-positions 1024 --vocab 26679 --seq-len 128 --micro-batch 1 --steps 8 --warmup-steps 2
Prints one JSON line: {"tokens_per_s": ..., "step_time_s": {"median": ...}, ...}
"""
import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--n-layer", type=int, default=12)
    p.add_argument("--n-embd", type=int, default=768)
    p.add_argument("--n-head", type=int, default=12)
    p.add_argument("--n-positions", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=26679)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--store", default="", help=argparse.SUPPRESS)
    return p.parse_args()


def build_model(a):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Conv1D(nn.Module):
        def __init__(self, n_in, n_out):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(n_in, n_out))
            self.bias = nn.Parameter(torch.zeros(n_out))

        def forward(self, x):
            size = x.size()[:-1] + (self.weight.size(1),)
            return torch.addmm(self.bias, x.reshape(-1, x.size(-1)), self.weight).view(size)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = Conv1D(a.n_embd, 3 * a.n_embd)
            self.c_proj = Conv1D(a.n_embd, a.n_embd)
            P = a.n_positions
            # uint8 like older HuggingFace GPT-2: Gloo in PyTorch 1.13 cannot broadcast bool
            # buffers (DDP's broadcast_buffers fails with "Invalid scalar type"); same bytes
            # as dptwin's bool mask, which its Gloo backend moves as uint8.
            self.register_buffer("bias", torch.ones(P, P, dtype=torch.uint8).tril().view(1, 1, P, P))
            self.register_buffer("masked_bias", torch.tensor(-1e4))

        def forward(self, x):
            B, T, C = x.shape
            H, D = a.n_head, C // a.n_head
            q, k, v = self.c_attn(x).split(C, dim=2)
            q = q.view(B, T, H, D).transpose(1, 2)
            k = k.view(B, T, H, D).transpose(1, 2)
            v = v.view(B, T, H, D).transpose(1, 2)
            att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = torch.softmax(att, dim=-1)
            y = torch.matmul(att, v).transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = Conv1D(a.n_embd, 4 * a.n_embd)
            self.c_proj = Conv1D(4 * a.n_embd, a.n_embd)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(a.n_embd)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(a.n_embd)
            self.mlp = Mlp()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class Gpt2(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(a.vocab, a.n_embd)
            self.wpe = nn.Embedding(a.n_positions, a.n_embd)
            self.h = nn.ModuleList([Block() for _ in range(a.n_layer)])
            self.ln_f = nn.LayerNorm(a.n_embd)
            g = torch.Generator().manual_seed(1234)
            std, proj = 0.02, 0.02 / math.sqrt(2 * a.n_layer)
            with torch.no_grad():
                for name, p in self.named_parameters():
                    if name.endswith("c_proj.weight"):
                        p.normal_(0, proj, generator=g)
                    elif name.endswith(".weight") and p.dim() == 2:
                        p.normal_(0, std, generator=g)

        def forward(self, idx, targets):
            T = idx.size(1)
            pos = torch.arange(T, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for b in self.h:
                x = b(x)
            x = self.ln_f(x)
            logits = torch.matmul(x, self.wte.weight.t())
            return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.reshape(-1))

    return Gpt2()


def worker(a):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(a.threads)
    store = dist.FileStore(a.store, a.np)
    dist.init_process_group("gloo", store=store, rank=a.rank, world_size=a.np)
    model = build_model(a)
    ddp = DDP(model, bucket_cap_mb=25, broadcast_buffers=True)
    decay = [p for n, p in model.named_parameters() if n.endswith(".weight") and p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if not (n.endswith(".weight") and p.dim() == 2)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    g = torch.Generator().manual_seed(1000 + a.rank)
    ends, losses = [], []
    dist.barrier()
    for step in range(a.steps):
        x = torch.randint(0, a.vocab, (a.micro_batch, a.seq_len), generator=g)
        y = torch.randint(0, a.vocab, (a.micro_batch, a.seq_len), generator=g)
        loss = ddp(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=False)
        losses.append(loss.item())
        ends.append(time.monotonic())  # CLOCK_MONOTONIC: one clock for the ranks of this host
    # A step's time is the period between the last rank's ends of consecutive
    # steps, as dptwin-exec measures it (exec/README, step_time_s).
    t = torch.tensor(ends, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    last = t.tolist()
    if a.rank == 0:
        measured = [last[k] - last[k - 1] for k in range(max(1, a.warmup_steps), a.steps)]
        med = statistics.median(measured)
        tokens = a.np * a.micro_batch * a.seq_len
        print(json.dumps({"peer": "pytorch-ddp-gloo", "torch": torch.__version__, "np": a.np, "threads": a.threads,
                          "tokens_per_step": tokens, "tokens_per_s": tokens / med,
                          "step_time_s": {"median": med, "min": min(measured), "max": max(measured)},
                          "loss_first": losses[0], "loss_last": losses[-1]}))
        sys.stdout.flush()
    dist.barrier()
    dist.destroy_process_group()


def main():
    a = parse()
    if a.rank >= 0:
        worker(a)
        return
    import subprocess
    with tempfile.TemporaryDirectory() as d:
        store = os.path.join(d, "store")
        env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), OPENBLAS_NUM_THREADS=str(a.threads),
                   MKL_NUM_THREADS=str(a.threads))
        procs = [subprocess.Popen([sys.executable, __file__] + sys.argv[1:] + ["--rank", str(r), "--store", store],
                                  env=env) for r in range(a.np)]
        codes = [p.wait() for p in procs]
        sys.exit(max(codes))


if __name__ == "__main__":
    main()
