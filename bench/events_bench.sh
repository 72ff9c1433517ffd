#!/usr/bin/env bash
# Map and reduce on a generated 1,024-rank torchrun --log-dir tree (bench/gen_logs.py, per-rank layout, xid79):
#   - one scan per node (128 nodes of 8 ranks): events bytes / log bytes;
#   - one scan per rank file (1,024 events files), then the merge: `diagnose --events` over all 1,024, timed;
#   - both merged reports must name the same cause and rank as `diagnose` over the whole tree.
# usage: bench/events_bench.sh [BIN] [OUT_DIR]   (make bench-events)
set -euo pipefail
BIN="$(readlink -f "${1:-build/firstfault}")"
OUT="${2:-build-bench/events}"
mkdir -p "$OUT"
OUT="$(readlink -f "$OUT")"
data="$OUT/tree"
if [ ! -f "$data.truth.json" ]; then
  rm -rf "$data"
  python3 "$(dirname "$0")/gen_logs.py" --out "$data" --ranks 1024 --total-bytes 512M --layout per-rank --failure xid79 --position middle --seed 11 >/dev/null
fi
cpu() { /usr/bin/time -f "%U %S %e %M" "$@" 2>&1 >/dev/null | tail -1; }
logs_bytes=$(du -sb "$data" | cut -f1)
rm -rf "$OUT/nodes" "$OUT/ranks"; mkdir -p "$OUT/nodes" "$OUT/ranks"
read -r u s e m < <(cpu "$BIN" diagnose "$data" --no-history --quiet --format json --mask-key bench)
echo "diagnose, whole tree: ${u}s user ${s}s sys ${e}s wall, ${m} KB RSS"
"$BIN" diagnose "$data" --no-history --quiet --format brief --mask-key bench > "$OUT/whole.txt" || true
t0=$(date +%s.%N)
nodes=()
for n in "$data"/node-*; do
  [ -d "$n" ] || continue
  h=$(basename "$n")
  extra=()
  [ -f "$data/kern-$h.log" ] && extra+=("$data/kern-$h.log")
  "$BIN" scan --quiet --mask-key bench -o "$OUT/nodes/$h.ffev" "${extra[@]}" "$n"
  nodes+=("$OUT/nodes/$h.ffev")
done
"$BIN" scan --quiet --mask-key bench -o "$OUT/nodes/launcher.ffev" "$data/launcher.log"
t1=$(date +%s.%N)
ev_bytes=$(du -cb "$OUT"/nodes/*.ffev | tail -1 | cut -f1)
echo "per-node scans: ${#nodes[@]} nodes + launcher, $(python3 -c "print(f'{$t1-$t0:.1f}')") s wall in all"
echo "events / logs: $ev_bytes / $logs_bytes bytes = $(python3 -c "print(f'{$ev_bytes/$logs_bytes:.5f} ({$logs_bytes/$ev_bytes:.0f}x smaller)')")"
read -r u s e m < <(cpu "$BIN" diagnose --no-history --quiet --format json --events "$OUT"/nodes/*.ffev)
"$BIN" diagnose --no-history --quiet --format brief --events "$OUT"/nodes/*.ffev > "$OUT/nodes.txt" || true
echo "merge of $(ls "$OUT"/nodes/*.ffev | wc -l) node events files: ${u}s user ${s}s sys ${e}s wall, ${m} KB RSS"
i=0
while IFS= read -r f; do
  i=$((i + 1))
  "$BIN" scan --quiet --mask-key bench -o "$OUT/ranks/$(printf %05d $i).ffev" "$f"
done < <(find "$data" -name stderr.log | sort | head -1024)
files=("$OUT"/ranks/*.ffev)
read -r u s e m < <(cpu "$BIN" diagnose --no-history --quiet --format json --events "${files[@]}")
echo "merge of ${#files[@]} per-rank events files: ${u}s user ${s}s sys ${e}s wall, ${m} KB RSS"
echo "whole: $(cat "$OUT/whole.txt")"
echo "nodes: $(cat "$OUT/nodes.txt")"
cmp -s <(cut -d' ' -f1-4 "$OUT/whole.txt") <(cut -d' ' -f1-4 "$OUT/nodes.txt") && echo "per-node merge: same verdict, kind, rank and host" || echo "per-node merge: DIFFERENT"
