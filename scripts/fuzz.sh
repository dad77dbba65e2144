#!/usr/bin/env bash
# scripts/fuzz.sh — builds and runs the libFuzzer harnesses of fuzz/ (issue 6).
#
#   scripts/fuzz.sh                       # build, then run every harness 30 s
#   scripts/fuzz.sh --time 120 scenario   # one harness, 2 minutes
#   scripts/fuzz.sh --build-only
#   scripts/fuzz.sh --smoke               # what `meson test fuzz_smoke` runs: 8 s each
#
# Options: --time S (per harness, default 30), --build-dir DIR (default
# build-fuzz), --jobs N (libFuzzer workers per harness, default 1),
# --build-only, --smoke. Harness names: scenario cluster model profile units.
#
# Compiles the parser sources of core/, topology/, models/ and sim/ directly
# with clang++-14 -fsanitize=fuzzer,address,undefined (no Meson; ninja keeps
# the build incremental). Seeds come from fuzz/corpus/<harness>/ (never
# modified); new inputs go to DIR/corpus/<harness>/, crashes to
# DIR/artifacts/<harness>/. Exit status: 0 no crash, 1 a crash/hang/leak found,
# 77 clang++-14 or libFuzzer missing (meson treats 77 as "skipped").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build-fuzz"
TIME=30
JOBS=1
BUILD_ONLY=0
SEED=""
ALL_HARNESSES=(scenario cluster model profile units)
HARNESSES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --time) TIME="$2"; shift 2 ;;
    --build-dir) BUILD="$(mkdir -p "$2" && cd "$2" && pwd)"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;
    --build-only) BUILD_ONLY=1; shift ;;
    --smoke) TIME=8; SEED="-seed=1"; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) HARNESSES+=("$1"); shift ;;
  esac
done
[ ${#HARNESSES[@]} -gt 0 ] || HARNESSES=("${ALL_HARNESSES[@]}")

CXX="${FUZZ_CXX:-clang++-14}"
if ! command -v "$CXX" >/dev/null 2>&1; then
  echo "fuzz.sh: SKIP: $CXX not found (install clang-14 and libclang-rt-14-dev: scripts/install-deps.sh)"
  exit 77
fi
mkdir -p "$BUILD"
probe="$BUILD/probe.cpp"
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$probe"
if ! "$CXX" -fsanitize=fuzzer,address,undefined "$probe" -o "$BUILD/probe" >/dev/null 2>&1; then
  echo "fuzz.sh: SKIP: $CXX cannot link -fsanitize=fuzzer,address,undefined (install libclang-rt-14-dev)"
  exit 77
fi
command -v ninja >/dev/null || { echo "fuzz.sh: ninja not found"; exit 1; }

# ---- build (ninja file generated here; header dependencies through depfiles) ----
LIB_SOURCES=(
  core/error.cpp core/precision.cpp core/yaml_reader.cpp
  topology/device_spec.cpp topology/topology.cpp topology/cluster.cpp topology/cluster_parse.cpp
  topology/cluster_build.cpp
  models/gpt2.cpp models/workload.cpp models/memory.cpp
  sim/device_profile.cpp sim/strategy.cpp sim/scenario.cpp sim/collectives.cpp sim/flow_solver.cpp
)
FLAGS="-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all \
-fsanitize=fuzzer-no-link -I$ROOT -I$BUILD/gen"
{
  echo "cxxflags = $FLAGS"
  echo "rule cxx"
  echo "  command = $CXX \$cxxflags -MMD -MF \$out.d -c \$in -o \$out"
  echo "  depfile = \$out.d"
  echo "  deps = gcc"
  echo "  description = CXX \$out"
  echo "rule embed"
  echo "  command = python3 $ROOT/tools/embed_files.py \$out \$ns \$fn \$in"
  echo "rule ar"
  echo "  command = rm -f \$out && ar rcs \$out \$in"
  echo "rule link"
  echo "  command = $CXX -fsanitize=fuzzer,address,undefined \$in -o \$out -lyaml-cpp -lfmt -pthread"
  echo "  description = LINK \$out"
  echo "build gen/topology_presets.cpp: embed $(ls "$ROOT"/topology/presets/*.yaml | tr '\n' ' ')"
  echo "  ns = dptwin::topology"
  echo "  fn = embedded_presets"
  echo "build gen/builtin_scenarios.cpp: embed $(ls "$ROOT"/scenarios/*.yaml | tr '\n' ' ')"
  echo "  ns = dptwin::sim"
  echo "  fn = embedded_scenarios"
  objs=""
  for s in "${LIB_SOURCES[@]}"; do
    o="obj/${s%.cpp}.o"; objs="$objs $o"
    echo "build $o: cxx $ROOT/$s"
  done
  for g in topology_presets builtin_scenarios; do
    echo "build obj/gen/$g.o: cxx gen/$g.cpp"; objs="$objs obj/gen/$g.o"
  done
  echo "build libdptwin_fuzz.a: ar $objs"
  for h in "${ALL_HARNESSES[@]}"; do
    echo "build obj/fuzz/fuzz_$h.o: cxx $ROOT/fuzz/fuzz_$h.cpp"
    echo "build fuzz_$h: link obj/fuzz/fuzz_$h.o libdptwin_fuzz.a"
  done
} > "$BUILD/build.ninja.new"
cmp -s "$BUILD/build.ninja.new" "$BUILD/build.ninja" 2>/dev/null || mv "$BUILD/build.ninja.new" "$BUILD/build.ninja"
rm -f "$BUILD/build.ninja.new"
targets=()
for h in "${HARNESSES[@]}"; do targets+=("fuzz_$h"); done
ninja -C "$BUILD" "${targets[@]}"
[ "$BUILD_ONLY" = 1 ] && exit 0

# ---- run ----
# Parsers must answer fast: 30 s per input (under ASan) is a hang; 2 GiB is a memory blow-up.
status=0
for h in "${HARNESSES[@]}"; do
  work="$BUILD/corpus/$h"; art="$BUILD/artifacts/$h"
  mkdir -p "$work" "$art"
  echo "== fuzz_$h: ${TIME}s, seeds fuzz/corpus/$h ($(ls "$ROOT/fuzz/corpus/$h" | wc -l) files)"
  log="$BUILD/fuzz_$h.log"
  # -jobs makes libFuzzer write fuzz-N.log into the current directory: only with --jobs N > 1.
  PARALLEL=""
  [ "$JOBS" -gt 1 ] && PARALLEL="-jobs=$JOBS -workers=$JOBS"
  set +e
  (cd "$ROOT" && "$BUILD/fuzz_$h" -max_total_time="$TIME" -timeout=30 -rss_limit_mb=2048 -max_len=16384 \
     -print_final_stats=1 $SEED -artifact_prefix="$art/" $PARALLEL "$work" "$ROOT/fuzz/corpus/$h") \
     > "$log" 2>&1
  rc=$?
  set -e
  if [ "$JOBS" -gt 1 ]; then cat "$ROOT"/fuzz-[0-9]*.log >> "$log" 2>/dev/null || true; rm -f "$ROOT"/fuzz-[0-9]*.log; fi
  execs=$(grep -h "stat::number_of_executed_units" "$log" | awk '{s+=$2} END {print s+0}')
  cov=$(grep -ho "cov: [0-9]*" "$log" | tail -1)
  if [ $rc -ne 0 ] || ls "$art" | grep -q .; then
    echo "   FAILED (exit $rc): $(grep -m1 -E 'ERROR|==[0-9]+==|terminate|Assertion|runtime error' "$log")"
    echo "   artifacts: $(ls "$art" | tr '\n' ' ')  log: $log"
    status=1
  else
    echo "   ok: $execs executions, $cov, corpus $(ls "$work" | wc -l) files, no crash"
  fi
done
exit $status
