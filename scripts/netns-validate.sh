#!/usr/bin/env bash
# scripts/netns-validate.sh — calibrate and validate on an emulated cluster.
#
#   scripts/netns-validate.sh DPTWIN RATE_GBIT OUT_DIR
#   (DPTWIN: a binary with the calibrate/validate subcommands, e.g. build/apps/dptwin)
#
# Creates 4 network namespaces at RATE_GBIT Gbit/s (scripts/netns-cluster.sh),
# calibrates in them (microbenchmarks only: collectives on 2 and 4 ranks across
# the namespaces, priced on scenarios/validation/netns-4x-<RATE>gbit.yaml), then
# runs scenarios/validation/netns-<RATE>gbit.yaml (predicted at the machine's
# speed states probed during the validation, --run-states, as the default
# matrix in README) and removes the namespaces, even when interrupted. The
# calibration binds its ranks as the matrix says (`bind: none` there; nn25 in
# validate/README). Exits 0
# with "skip" on stderr where namespaces cannot be made.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dptwin=$1 rate=$2 out=$3
if [ "$(id -u)" != 0 ] || ! ip netns add dptwin-probe 2>/dev/null; then
  echo "skip: network namespaces are unavailable here (needs root and CAP_NET_ADMIN)" >&2
  exit 0
fi
ip netns del dptwin-probe
mkdir -p "$out"
matrix="$here/scenarios/validation/netns-${rate}gbit.yaml"
cluster="$here/scenarios/validation/netns-4x-${rate}gbit.yaml"
"$here/scripts/netns-cluster.sh" run 4 "${rate}gbit" -- bash -c "
  '$dptwin' calibrate --ranks 1,2,4 --max-bytes '64 MiB' --cluster '$cluster' --netns '$matrix' \
     --out '$out/profile-${rate}gbit.yaml' > /dev/null &&
  '$dptwin' validate '$matrix' --profile '$out/profile-${rate}gbit.yaml' --run-states --out '$out/validate-${rate}gbit'"
