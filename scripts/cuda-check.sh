#!/usr/bin/env bash
# scripts/cuda-check.sh — build dptwin-exec against a CUDA LibTorch with NCCL,
# run the CUDA tests, and time GPT-2 (the paper's model) on one GPU next to the
# simulator's prediction for it.
#
# Usage: scripts/cuda-check.sh [OUTDIR]        (default out/cuda-check)
#   TORCH_PREFIX  a CUDA LibTorch: a libtorch archive or a pip torch package
#                 directory (default: python3's torch package)
#   NCCL_PREFIX   where include/nccl.h and lib/libnccl.so* live (default:
#                 /usr if /usr/include/nccl.h exists, else pip's nvidia nccl)
#   BUILD_DIR     default build-cuda
# Needs a C++20 compiler, meson, ninja, the CUDA toolkit's headers and the
# Debian/Ubuntu -dev packages README.md lists; MPI is not used.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-out/cuda-check}
build=${BUILD_DIR:-build-cuda}
mkdir -p "$out"
say() { printf '\n== %s\n' "$*"; }
meson_cmd=(meson)
command -v meson > /dev/null || meson_cmd=(python3 -m mesonbuild.mesonmain)

TORCH_PREFIX=${TORCH_PREFIX:-$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')}
if [[ -z ${NCCL_PREFIX+x} ]]; then
  NCCL_PREFIX=
  if [[ ! -f /usr/include/nccl.h ]]; then
    h=$(python3 -c 'import nvidia, os; print(" ".join(nvidia.__path__))' 2> /dev/null | xargs -r -I{} find {} -name nccl.h | head -1)
    [[ -n $h ]] && NCCL_PREFIX=$(dirname "$(dirname "$h")")
  fi
fi
[[ -z ${CUDA_PATH:-} && -d /usr/local/cuda ]] && export CUDA_PATH=/usr/local/cuda
say "toolchain"
{
  c++ --version | head -1
  "${meson_cmd[@]}" --version
  nvcc --version 2> /dev/null | tail -1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2> /dev/null
  echo "TORCH_PREFIX=$TORCH_PREFIX NCCL_PREFIX=$NCCL_PREFIX CUDA_PATH=${CUDA_PATH:-}"
} 2>&1 | tee "$out/toolchain.txt"

say "configure and build ($build)"
if [[ ! -d $build ]]; then
  "${meson_cmd[@]}" setup "$build" -Dexec=enabled -Dcuda=enabled -Dnccl=enabled -Dmpi=disabled \
    -Dtorch_prefix="$TORCH_PREFIX" -Dnccl_prefix="$NCCL_PREFIX" > "$out/configure.log" 2>&1 ||
    { tail -40 "$out/configure.log"; exit 2; }
fi
grep -E "execution backend|MPI backend|CUDA|NCCL" "$out/configure.log" || true
ninja -k 0 -C "$build" exec/dptwin-exec apps/dptwin tests/exec/test_exec_unit tests/exec/test_exec_torch \
  tests/exec/test_exec_cuda > "$out/build.log" 2>&1 || { grep -E -A3 "error:" "$out/build.log" | head -80; exit 3; }
echo "built"

say "tests: exec_unit exec_torch exec_cuda"
"${meson_cmd[@]}" test -C "$build" --no-rebuild --print-errorlogs exec_unit exec_torch exec_cuda > "$out/tests.log" 2>&1
tests_rc=$?
grep -E "^ *[0-9]+/[0-9]+ |^Ok:|^Fail:" "$out/tests.log"
grep -hE "relative|loss .* -> |gradient relative" "$build/meson-logs/testlog.txt" | sed 's/^.*MESSAGE: //' | head -20

say "NCCL with two ranks on one GPU (expected to be refused by NCCL)"
W=$build/exec/dptwin-exec
timeout 120 "$W" --model tiny --strategy dps --backend nccl --np 2 --steps 3 --comm-timeout-s 30 \
  --launch-timeout-s 60 > "$out/nccl2.log" 2>&1
echo "rc $?"; grep -iE "error|duplicate|invalid" "$out/nccl2.log" | head -3

say "GPT-2 paper model on one GPU: measured vs simulated (micro-batch 4, 512 tokens, the paper's)"
cat > "$out/h200.yaml" << 'EOF'
name: gpu-single
description: GPT-2 106M (the paper's model) on one H200 at the paper's per-device batch
model: paper
cluster: hgx-h200
devices: [1]
strategy: [single, dps+amp, horovod+amp]
micro_batch: 4
accumulation: 1
amp: {dps+amp: o2, horovod+amp: o1, default: none}
half: fp16
EOF
"$build/apps/dptwin" simulate "$out/h200.yaml" -f json > "$out/predicted.json" 2> "$out/predicted.err"
run() {  # name, args...
  local name=$1
  shift
  timeout 300 "$W" --model paper --micro-batch 4 --steps 60 --warmup-steps 20 --synthetic-tokens 2000000 \
    --out "$out/$name.json" "$@" > "$out/$name.log" 2>&1 || { echo "$name failed"; tail -5 "$out/$name.log"; }
}
run single_fp32 --strategy single
run dpsamp_fp16 --strategy dps+amp --backend nccl --precision fp16
run hvdamp_fp16 --strategy horovod+amp --backend nccl --precision fp16
run single_bf16 --strategy single --precision bf16
python3 - "$out" << 'EOF'
import json, sys, os
out = sys.argv[1]
pred = {}
try:
    for p in json.load(open(os.path.join(out, "predicted.json")))["points"]:
        pred[p["params"]["strategy"]] = p
except Exception as e:
    print("no prediction:", e)
rows = [("single_fp32", "single"), ("dpsamp_fp16", "dps+amp"), ("hvdamp_fp16", "horovod+amp"), ("single_bf16", None)]
print(f"{'run':13} {'measured ms':>11} {'fwd':>6} {'bwd':>6} {'opt':>6} {'GPU GiB':>8} {'tok/s':>8} {'predicted ms':>12} {'compute':>8} {'opt':>6} {'error %':>8}")
for name, strat in rows:
    try:
        s = json.load(open(os.path.join(out, name + ".json")))["summary"]
    except Exception:
        print(f"{name:13} (no result)")
        continue
    ms = s["step_time_s"]["median"] * 1e3
    ph = s.get("phases", {})
    f = lambda k: ph.get(k + "_s", {}).get("median", 0) * 1e3
    p = pred.get(strat) if strat else None
    nan = float("nan")
    pms = p["step_time_s"] * 1e3 if p else nan
    pc = p["breakdown"]["compute_s"] * 1e3 if p else nan
    po = p["breakdown"]["optimizer_s"] * 1e3 if p else nan
    err = (pms - ms) / ms * 100 if p else nan
    print(f"{name:13} {ms:11.2f} {f('forward'):6.2f} {f('backward'):6.2f} {f('optimizer'):6.2f} "
          f"{s.get('device_peak_bytes', 0) / 2**30:8.2f} {s['tokens_per_s']:8.0f} {pms:12.2f} {pc:8.2f} {po:6.2f} {err:8.1f}")
EOF
exit $tests_rc
