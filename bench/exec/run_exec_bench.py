#!/usr/bin/python3
"""bench/exec: tokens/s of every dptwin-exec strategy on 2 ranks for the paper's
106M GPT-2 (context reduced to fit minutes), side by side in the same run with
PyTorch's DistributedDataParallel on Gloo (Debian python3-torch, peer_ddp.py)
training the same model with the same batch and threads; then the allreduce
bandwidth of each backend against plain MPI_Allreduce (1 MB .. 256 MB).

  python3 bench/exec/run_exec_bench.py --build-dir build [--rounds 2] [--seq-len 128] [--micro-batch 1]

The peer and dptwin's dps alternate round by round, so background load hits
both alike; the ratio is taken from the per-round medians. Target:
dptwin dps / PyTorch DDP >= 1.0.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def parse():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default="build")
    p.add_argument("--model", default="paper")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--steps", type=int, default=7)
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--strategies", default="sps,dps,horovod,dps+amp,horovod+amp")
    p.add_argument("--backends", default="gloo,mpi")
    p.add_argument("--skip-allreduce", action="store_true")
    p.add_argument("--json", default="", help="write all figures here")
    return p.parse_args()


MODEL = {"paper": dict(n_layer=12, n_embd=768, n_head=12, n_positions=1024, vocab=26679),
         "gpt2": dict(n_layer=12, n_embd=768, n_head=12, n_positions=1024, vocab=50257)}


def env():
    e = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return e


def run_dptwin(a, worker, strategy, backend, np_):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        cmd = [worker, "--strategy", strategy, "--np", str(np_), "--backend", backend, "--model", a.model,
               "--seq-len", str(a.seq_len), "--micro-batch", str(a.micro_batch), "--threads", str(a.threads),
               "--steps", str(a.steps), "--warmup-steps", str(a.warmup_steps), "--out", out,
               "--comm-timeout-s", "600", "--launch-timeout-s", "1800"]
        subprocess.run(cmd, check=True, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        r = json.load(open(out))
        s = r["summary"]
        return {"tokens_per_s": s["tokens_per_s"], "step_time_s": s["step_time_s"]["median"],
                "peak_rss_mib": s["peak_rss_bytes"] / 2**20,
                "phases": {k: v["median"] for k, v in s["phases"].items()}}


def run_peer(a, np_):
    m = MODEL[a.model]
    cmd = [sys.executable, os.path.join(HERE, "peer_ddp.py"), "--np", str(np_), "--threads", str(a.threads),
           "--n-layer", str(m["n_layer"]), "--n-embd", str(m["n_embd"]), "--n-head", str(m["n_head"]),
           "--n-positions", str(m["n_positions"]), "--vocab", str(m["vocab"]), "--seq-len", str(a.seq_len),
           "--micro-batch", str(a.micro_batch), "--steps", str(a.steps), "--warmup-steps", str(a.warmup_steps)]
    out = subprocess.run(cmd, check=True, env=env(), capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return {"tokens_per_s": r["tokens_per_s"], "step_time_s": r["step_time_s"]["median"]}


def main():
    a = parse()
    worker = os.path.join(a.build_dir, "exec", "dptwin-exec")
    allreduce = os.path.join(a.build_dir, "bench", "exec", "bench_exec_allreduce")
    if not os.access(worker, os.X_OK):
        sys.exit(f"no dptwin-exec at {worker}: build with LibTorch first (--build-dir)")
    backends = [b for b in a.backends.split(",") if b]
    strategies = [s for s in a.strategies.split(",") if s]
    print(f"# dptwin-exec vs PyTorch DDP: model {a.model}, seq_len {a.seq_len}, micro-batch {a.micro_batch}/rank, "
          f"{a.np} ranks x {a.threads} thread(s), {a.steps} steps ({a.warmup_steps} warm-up), {a.rounds} round(s); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    results = {}  # (strategy, backend) -> list of per-round dicts
    t0 = time.time()
    for rnd in range(a.rounds):
        results.setdefault(("pytorch-ddp", "gloo"), []).append(run_peer(a, a.np))
        print(f"  round {rnd}: pytorch ddp {results[('pytorch-ddp', 'gloo')][-1]['tokens_per_s']:.1f} tok/s",
              flush=True)
        for backend in backends:
            for s in strategies:
                r = run_dptwin(a, worker, s, backend, a.np)
                results.setdefault((s, backend), []).append(r)
                print(f"  round {rnd}: {s:12s} {backend:5s} {r['tokens_per_s']:.1f} tok/s", flush=True)
    single = run_dptwin(a, worker, "single", "gloo", 1)
    results[("single (1 rank)", "-")] = [single]

    peer = statistics.median(r["tokens_per_s"] for r in results[("pytorch-ddp", "gloo")])
    print(f"\n{'strategy':16s} {'backend':8s} {'tokens/s':>10s} {'step s':>8s} {'vs DDP':>7s}  per round tokens/s")
    for (s, b), rs in results.items():
        tps = statistics.median(r["tokens_per_s"] for r in rs)
        st = statistics.median(r["step_time_s"] for r in rs)
        rounds = " ".join(f"{r['tokens_per_s']:.1f}" for r in rs)
        print(f"{s:16s} {b:8s} {tps:10.1f} {st:8.3f} {tps / peer:6.2f}x  {rounds}")
    # The headline ratio: per round, dps on gloo over the peer of the same round.
    ratios = [d["tokens_per_s"] / p["tokens_per_s"]
              for d, p in zip(results.get(("dps", "gloo"), []), results[("pytorch-ddp", "gloo")])]
    if ratios:
        r = statistics.median(ratios)
        print(f"\ndptwin dps (gloo) / PyTorch DDP (gloo): {r:.3f}x (per round: "
              f"{', '.join(f'{x:.3f}' for x in ratios)}); target >= 1.0: {'met' if r >= 1.0 else 'NOT met'}")
    print(f"(strategy runs took {time.time() - t0:.0f} s)", flush=True)

    ar = None
    if not a.skip_allreduce and os.access(allreduce, os.X_OK):
        print("\n# allreduce bandwidth", flush=True)
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "ar.json")
            cmd = ["mpirun", "-np", str(a.np), "--bind-to", "none", "-x", "OMP_NUM_THREADS=1"]
            if a.np > (os.cpu_count() or 1):
                cmd.append("--oversubscribe")
            if os.geteuid() == 0:
                cmd.append("--allow-run-as-root")
            subprocess.run(cmd + [allreduce, "--json", out], check=True, env=env())
            ar = json.load(open(out))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"config": vars(a), "strategies": {f"{s}|{b}": rs for (s, b), rs in results.items()},
                       "dps_over_ddp": ratios, "allreduce": ar}, f, indent=1)


if __name__ == "__main__":
    main()
