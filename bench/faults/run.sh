#!/usr/bin/env bash
# The fault matrix of real runs (bench/faults/README.md): real PyTorch jobs, one injected fault each, scored.
#
#   bench/faults/run.sh [--bin BIN] [--out FILE]             the full matrix (~210 runs, about an hour on 2 cores)
#   bench/faults/run.sh --quick [--bin BIN] [--out FILE]     a fixed subset of 16 runs (about 4 minutes)
#   bench/faults/run.sh --rescore [--bin BIN] [--out FILE]   firstfault again over the runs kept by an earlier run
#   bench/faults/run.sh --only ID,ID [--bin BIN] [--out FILE]   chosen runs (ids or their 3-digit numbers)
#
# BIN defaults to build/firstfault, FILE to bench/faults/results.json (then the README tables follow it). Runs and their logs are kept under
# build-bench/faults/runs/<id>/. Needs root (tmpfs and bind mounts, the one-node Slurm) and the packages of
# `scripts/install-deps.sh --bench-faults` (python3-torch, openmpi-bin, python3-tqdm; slurm-wlm and munge).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/build/firstfault
OUT=$ROOT/bench/faults/results.json
cmd=(run)
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) extra+=(--quick) ;;
    --rescore) cmd=(rescore) ;;
    --only) extra+=(--only "$2"); shift ;;
    --bin) BIN=$2; shift ;;
    --out) OUT=$2; shift ;;
    -h|--help) sed -n 2,11p "$0"; exit 0 ;;
    *) echo "usage: $0 [--quick|--rescore|--only IDS] [--bin BIN] [--out FILE]" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$BIN" ] || { echo "run.sh: $BIN is not an executable (make build)" >&2; exit 2; }
if [ "${cmd[0]}" = run ]; then
  [ "$(id -u)" = 0 ] || { echo "run.sh: the matrix needs root (mounts, Slurm daemons)" >&2; exit 2; }
  for c in /usr/bin/python3 /usr/bin/torchrun mpirun srun sbatch munged; do
    command -v "$c" >/dev/null || { echo "run.sh: $c missing: scripts/install-deps.sh --bench-faults" >&2; exit 2; }
  done
  /usr/bin/python3 -c 'import torch, tqdm' 2>/dev/null ||
    { echo "run.sh: python3-torch/python3-tqdm missing: scripts/install-deps.sh --bench-faults" >&2; exit 2; }
  /usr/bin/python3 "$ROOT/bench/faults/harness.py" run "${extra[@]}" --bin "$BIN" --out "$OUT"
else
  /usr/bin/python3 "$ROOT/bench/faults/harness.py" rescore --bin "$BIN" --out "$OUT"
fi
# The tables of bench/faults/README.md and README.md follow the committed results.json only.
if [ "$(readlink -f "$OUT")" = "$ROOT/bench/faults/results.json" ] && [ ${#extra[@]} = 0 ]; then
  /usr/bin/python3 "$ROOT/bench/faults/harness.py" tables "$OUT" >/dev/null
fi
