#!/usr/bin/env python3
"""Simulation determinism (issue 6): the same inputs give byte-identical JSON.

usage: run_determinism.py DPTWIN TESTS_MALFORMED_DIR

Runs `dptwin simulate --format json --no-wall-time` on the builtin paper
scenario and on determinism/jitter.yaml (seeded compute jitter) with 1, 2 and
4 worker threads, twice each, and requires identical bytes. So that the check
can fail, it also requires that another seed changes the jittered output.
"""
import os
import subprocess
import sys
import tempfile


def simulate(dptwin, path, threads):
    args = [dptwin, "simulate"] + ([path] if path else []) + ["--format", "json", "--no-wall-time",
                                                             "--threads", str(threads)]
    p = subprocess.run(args, capture_output=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(args)} exited {p.returncode}: {p.stderr.decode()[:2000]}")
    return p.stdout


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    dptwin, here = sys.argv[1], sys.argv[2]
    jitter = os.path.join(here, "determinism", "jitter.yaml")
    failures = 0
    for name, path in (("paper-hal (builtin)", None), ("jitter.yaml", jitter)):
        ref = simulate(dptwin, path, 1)
        for threads in (1, 2, 4):
            for _ in range(2 if threads == 1 else 1):
                out = simulate(dptwin, path, threads)
                if out != ref:
                    failures += 1
                    print(f"FAIL {name}: --threads {threads} differs from --threads 1")
        print(f"{name}: {len(ref)} bytes, identical across runs and thread counts")
    # The jitter must really be drawn from the seed: another seed gives other numbers.
    with open(jitter, encoding="utf-8") as f:
        text = f.read().replace("seed: 7", "seed: 8")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as t:
        t.write(text)
    try:
        def without_file(out):  # the "file" field names the (temporary) path
            return b"\n".join(l for l in out.split(b"\n") if not l.strip().startswith(b'"file":'))
        a = without_file(simulate(dptwin, jitter, 2))
        b = without_file(simulate(dptwin, t.name, 2))
        if a == b:
            failures += 1
            print("FAIL: changing simulation.seed does not change the jittered results")
    finally:
        os.unlink(t.name)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
