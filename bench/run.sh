#!/usr/bin/env bash
# firstfault benchmark: speed, memory, start-up and diagnosis correctness on generated multi-rank logs,
# against rg / grep with firstfault's own exported patterns. Usage: bench/run.sh [--quick]
# See bench/README.md. Results: bench/runs/<YYYY-MM-DD>-<hostname>/{results.md,raw.csv,machine.txt}
set -euo pipefail

QUICK=0
for a in "$@"; do
  case "$a" in
    --quick) QUICK=1 ;;
    -h|--help) sed -n 2,4p "$0"; exit 0 ;;
    *) echo "usage: $0 [--quick]" >&2; exit 2 ;;
  esac
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
B=$ROOT/build-bench
FF=$B/firstfault
DATA=$B/data
RUNDIR=$BENCH/runs/$(date +%F)-$(hostname)
RAW=$RUNDIR/raw.csv
WORK=$B/bench-work
REPS=3
# A comparison tool that takes longer than this on a dataset is stopped and reported as "> N s".
if [ $QUICK = 1 ]; then TOOL_TIMEOUT=${TOOL_TIMEOUT:-10}; else TOOL_TIMEOUT=${TOOL_TIMEOUT:-300}; fi
mkdir -p "$DATA" "$RUNDIR" "$WORK"

log() { printf '== %s\n' "$*" >&2; }
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
apt_install() {  # apt_install PACKAGE
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y "$1" >/dev/null 2>&1 ||
    { $SUDO apt-get update >/dev/null 2>&1 && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y "$1" >/dev/null 2>&1; }
}

# --- tools -----------------------------------------------------------------------------------------
command -v rg >/dev/null || { log "installing ripgrep"; apt_install ripgrep; }
[ -x /usr/bin/time ] || { log "installing time"; apt_install time; }
command -v hyperfine >/dev/null || { log "installing hyperfine"; apt_install hyperfine || log "hyperfine unavailable; using date +%s.%N"; }
command -v cmake >/dev/null && command -v ninja >/dev/null || "$ROOT/scripts/install-deps.sh"

# --- build (Release, own build dir) ------------------------------------------------------------------
log "building $FF (Release)"
cmake -S "$ROOT" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFF_DEVELOPER_MODE=OFF >"$WORK/cmake.log" 2>&1
if ! cmake --build "$B" -j2 --target firstfault >>"$WORK/cmake.log" 2>&1; then
  # a source edited while it compiled can leave a stale object behind: rebuild once from clean
  log "build failed; retrying from clean"
  cmake --build "$B" -j2 --target firstfault --clean-first >>"$WORK/cmake.log" 2>&1 || { tail -30 "$WORK/cmake.log"; exit 1; }
fi
"$FF" kb export --patterns >"$DATA/patterns.txt"
PAT=$DATA/patterns.txt
"$FF" kb export --patterns --ere >"$DATA/patterns.ere"   # POSIX ERE for grep -E
PAT_ERE=$DATA/patterns.ere
# The floor of the scan-first design (bench/floor.cpp: reads, the gate, a rank/time lexer; no diagnosis)
"$FF" kb export --gate >"$DATA/gate.tsv"
FLOOR=$WORK/floor
c++ -O2 -std=c++20 "$BENCH/floor.cpp" -o "$FLOOR" -lhs >>"$WORK/cmake.log" 2>&1 || { log "bench/floor.cpp does not build"; FLOOR=""; }

# --- datasets ----------------------------------------------------------------------------------------
# gen NAME ARGS...: generated once; NAME.truth.json is written last, so it marks a complete dataset.
gen() {
  local name=$1; shift
  if [ -s "$DATA/$name.truth.json" ] && [ -e "$DATA/$name" ]; then log "reusing $DATA/$name"; return; fi
  log "generating $DATA/$name ($*)"
  rm -rf "${DATA:?}/$name" "$DATA/$name.truth.json"
  python3 "$BENCH/gen_logs.py" --out "$DATA/$name" --seed 42 "$@" >/dev/null
}
# name | what the row is for
DATASETS=()
if [ $QUICK = 1 ]; then
  gen console-1024r-200M --ranks 1024 --total-bytes 200M --layout console --failure cuda_oom --position middle --culprit-rank 575
  gen perrank-256x2M --ranks 256 --total-bytes 512M --layout per-rank --failure xid79 --position early --culprit-rank 77
  DATASETS=(console-1024r-200M perrank-256x2M)
else
  gen console-1024r-2G --ranks 1024 --total-bytes 2G --layout console --failure cuda_oom --position middle --culprit-rank 575
  gen perrank-1024x2M --ranks 1024 --total-bytes 2G --layout per-rank --failure xid79 --position early --culprit-rank 77
  DATASETS=(console-1024r-2G perrank-1024x2M)
fi
gen console-1024r-100M --ranks 1024 --total-bytes 100M --layout console --failure host_oom --position last --culprit-rank 301
DATASETS+=(console-1024r-100M)
if [ $QUICK = 0 ]; then
  gen console-1024r-4G --ranks 1024 --total-bytes 4G --layout console --failure cuda_oom --position early --culprit-rank 1000
  DATASETS+=(console-1024r-4G)
fi
: >"$WORK/empty.log"

# --- measurement helpers -----------------------------------------------------------------------------
echo "dataset,bytes,tool,run,seconds,peak_rss_kb,exit,note,cpu_seconds" >"$RAW"
bytes_of() { du -sb --apparent-size "$1" | cut -f1; }
warm() { if [ -d "$1" ]; then find "$1" -type f -exec cat {} + >/dev/null; else cat "$1" >/dev/null; fi; }

# measure DATASET TOOL CMD...: one untimed warm-up run (for firstfault: the correctness run), then $REPS runs under /usr/bin/time, each capped at
# $TOOL_TIMEOUT (firstfault is never capped). A timed-out warm-up skips the repetitions.
measure() {
  local ds=$1 tool=$2; shift 2
  local bytes; bytes=$(bytes_of "$DATA/$ds")
  local cap=$TOOL_TIMEOUT; [ "${tool%% *}" = firstfault ] && cap=0
  local rc=0
  # firstfault's warm-up is the correctness run just before
  # Output goes to a file, not /dev/null: GNU grep stops at the first match when its output is /dev/null
  # (even with -c), which made it look 10x faster than it is on the consoles (0.17 s against 1.38 s).
  [ "$tool" = firstfault ] || timeout "$cap" "$@" >"$WORK/stdout.txt" 2>&1 || rc=$?
  if [ $rc = 124 ]; then
    echo "$ds,$bytes,$tool,warmup,$cap,,124,timeout" >>"$RAW"; log "$tool on $ds: timed out after ${cap}s"; return
  fi
  for i in $(seq 1 $REPS); do
    rc=0
    timeout "$cap" /usr/bin/time -f '%e %M %U %S' -o "$WORK/time.out" "$@" >"$WORK/stdout.txt" 2>&1 || rc=$?
    if [ $rc = 124 ]; then echo "$ds,$bytes,$tool,$i,$cap,,124,timeout," >>"$RAW"; continue; fi
    # /usr/bin/time prints "Command exited with non-zero status N" first on failure: take the last line
    read -r s kb us ss < <(tail -1 "$WORK/time.out")
    echo "$ds,$bytes,$tool,$i,$s,$kb,$rc,,$(python3 -c "print(round($us + $ss, 3))")" >>"$RAW"
  done
  log "$tool on $ds: done"
}

CHECKS=$WORK/checks.tsv; : >"$CHECKS"
for ds in "${DATASETS[@]}"; do
  P=$DATA/$ds
  log "dataset $ds ($(bytes_of "$P") bytes)"
  warm "$P"
  # correctness (also firstfault's warm-up run)
  rc=0; "$FF" diagnose "$P" --format json >"$WORK/$ds.json" 2>"$WORK/$ds.stderr" || rc=$?
  python3 - "$WORK/$ds.json" "$P.truth.json" "$rc" >>"$CHECKS" <<'EOF'
import json, sys
rep, truth, rc = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]
try:
    d = json.load(open(rep))
    kind = (d.get("root_cause") or {}).get("kind") or d.get("verdict")
    rank = d.get("initiating_rank")
except Exception as e:  # no report
    kind, rank = f"no report (exit {rc})", None
ok = kind == truth["kind"] and rank == truth["initiating_rank"]
print("\t".join([truth and sys.argv[2].rsplit("/", 1)[1][:-len(".truth.json")], truth["kind"], str(truth["initiating_rank"]),
                 str(kind), str(rank), "OK" if ok else "WRONG"]))
EOF
  measure "$ds" firstfault "$FF" diagnose "$P" --format json
  # one thread: the CPU a diagnosis needs (two threads add the cost of handing blocks between cores)
  measure "$ds" "firstfault --threads 1" "$FF" diagnose "$P" --format json --threads 1
  # the reference mode (every line read in full): what the scan gate saves
  measure "$ds" "firstfault --exact" "$FF" diagnose "$P" --format json --exact
  if [ -d "$P" ]; then
    measure "$ds" rg rg -c -f "$PAT" "$P"
    measure "$ds" "rg --no-unicode" rg --no-unicode -c -f "$PAT" "$P"
    measure "$ds" "grep -E" grep -r -c -E -f "$PAT" "$P"
    measure "$ds" "wc -l" sh -c 'find "$1" -type f -exec cat {} + | wc -l' sh "$P"
  else
    if [ -n "$FLOOR" ]; then measure "$ds" "floor (bench/floor.cpp)" "$FLOOR" "$DATA/gate.tsv" "$P"; fi
    measure "$ds" rg rg -c -f "$PAT" "$P"
    measure "$ds" "rg --no-unicode" rg --no-unicode -c -f "$PAT" "$P"
    measure "$ds" "grep -E" grep -c -E -f "$PAT_ERE" "$P"
    measure "$ds" "wc -l" wc -l "$P"
  fi
done

# --- start-up: diagnose an empty file (the database is cached after the first run) ---------------------
log "start-up time"
"$FF" diagnose "$WORK/empty.log" >/dev/null 2>&1 || true
if command -v hyperfine >/dev/null; then
  hyperfine -N -i --warmup 3 --runs 30 --export-json "$WORK/startup.json" "$FF diagnose $WORK/empty.log" >/dev/null 2>&1
  python3 - "$WORK/startup.json" <<'EOF' >>"$RAW"
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
print(f"startup-empty,0,firstfault,hyperfine-min,{r['min']:.4f},,,mean {r['mean']*1000:.1f} ms over {len(r['times'])} runs")
EOF
else
  best=""
  for i in $(seq 1 20); do
    t0=$(date +%s.%N); "$FF" diagnose "$WORK/empty.log" >/dev/null 2>&1 || true; t1=$(date +%s.%N)
    best=$(python3 -c "t=$t1-$t0; b='$best'; print(t if not b or t<float(b) else b)")
  done
  echo "startup-empty,0,firstfault,best-of-20,$best,,,date +%s.%N" >>"$RAW"
fi

# --- machine ----------------------------------------------------------------------------------------
{
  echo "date: $(date -u +%FT%TZ)"; echo "mode: $([ $QUICK = 1 ] && echo quick || echo full)"
  echo "firstfault commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (+ uncommitted changes)')"
  echo "patterns: $(wc -l <"$PAT") lines from firstfault kb export --patterns"
  echo "rg: $(rg --version | head -1)"; echo "grep: $(grep --version | head -1)"
  echo "hyperfine: $(hyperfine --version 2>/dev/null || echo none)"
  echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo; echo "## uname -a"; uname -a; echo; echo "## free -g"; free -g; echo; echo "## lscpu"; lscpu
} >"$RUNDIR/machine.txt"

# --- results table -------------------------------------------------------------------------------------
python3 - "$RAW" "$CHECKS" "$RUNDIR/machine.txt" "$TOOL_TIMEOUT" >"$RUNDIR/results.md" <<'EOF'
import csv, statistics, sys
raw, checks, machine, cap = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
rows = list(csv.DictReader(open(raw)))
chk = {l.split("\t")[0]: l.rstrip("\n").split("\t") for l in open(checks) if l.strip()}
order, agg = [], {}
for r in rows:
    key = (r["dataset"], r["tool"])
    if key not in agg:
        order.append(key); agg[key] = {"bytes": int(r["bytes"]), "wall": [], "cpu": [], "rss": 0, "timeout": False, "note": r["note"]}
    b = agg[key]
    if r["exit"] == "124":
        b["timeout"] = True; continue
    b["wall"].append(float(r["seconds"]))
    if r.get("cpu_seconds"):
        b["cpu"].append(float(r["cpu_seconds"]))
    if r["peak_rss_kb"]:
        b["rss"] = max(b["rss"], int(r["peak_rss_kb"]))
med = lambda v: statistics.median(v) if v else None
out = []
m = dict(l.split(": ", 1) for l in open(machine).read().split("\n\n")[0].splitlines() if ": " in l)
out.append(f"# firstfault benchmark ({m.get('mode')}, {m.get('date')})\n")
out.append(f"firstfault {m.get('firstfault commit')}; {m.get('rg')}; {m.get('grep')}; {m.get('patterns')}; load average at end {m.get('load average at end')}.\n")
out.append("Warm page cache; medians of 3 runs after one warm-up run, every tool in the same run; CPU = user + sys "
           "(less inflated than wall time on a shared machine); MB = 10^6 bytes. "
           "firstfault / tool = the tool's CPU time / firstfault's (>1: firstfault uses less CPU).\n")
out.append("| dataset | size MB | tool | CPU s (median) | MB/s per core (CPU) | wall s (median) | peak RSS MB | firstfault / tool (CPU) | diagnosis (expected -> got) |")
out.append("|---|---:|---|---:|---:|---:|---:|---:|---|")
for ds, tool in order:
    b = agg[(ds, tool)]
    if ds.startswith("startup"):
        continue
    ff = agg.get((ds, "firstfault"))
    cpu, wall = med(b["cpu"]), med(b["wall"])
    ffc = med(ff["cpu"]) if ff else None
    ratio = f"{cpu / ffc:.2f}x" if (tool != "firstfault" and cpu and ffc) else ""
    if b["timeout"] and cpu is None:
        ratio = f"> {float(cap) / ffc:.1f}x" if ffc else ""
    diag = ""
    if tool == "firstfault" and ds in chk:
        c = chk[ds]
        diag = f"**{c[5]}** {c[1]} rank {c[2]} -> {c[3]} rank {c[4]}"
    cpu_s = f"{cpu:.2f}" if cpu is not None else f"> {cap} (stopped)"
    speed = f"{b['bytes'] / 1e6 / cpu:.0f}" if cpu else ""
    wall_s = f"{wall:.2f}" if wall is not None else ""
    rss = f"{b['rss'] / 1024:.0f}" if b["rss"] else ""
    out.append(f"| {ds} | {b['bytes']/1e6:.0f} | {tool} | {cpu_s} | {speed} | {wall_s} | {rss} | {ratio} | {diag} |")
for (ds, tool), b in agg.items():
    if ds.startswith("startup") and b["wall"]:
        out.append(f"\nStart-up (`firstfault diagnose` on an empty file, cached database): **{min(b['wall'])*1000:.1f} ms** ({b['note'] or 'min'}).")
ff_rows = [(agg[(ds, t)]['bytes'], agg[(ds, t)]['rss']) for ds, t in order
           if t == "firstfault" and ds.startswith("console") and agg[(ds, t)]['rss']]
if len(ff_rows) > 1:
    ff_rows.sort()
    (b0, r0), (b1, r1) = ff_rows[0], ff_rows[-1]
    out.append(f"\nMemory scaling (console datasets): peak RSS {r0/1024:.0f} MB at {b0/1e6:.0f} MB input vs {r1/1024:.0f} MB at {b1/1e6:.0f} MB input "
               f"({(r1 - r0) / 1024 / max(1e-9, (b1 - b0) / 1e6):.3f} MB of RSS per extra MB of input).")
print("\n".join(out))
EOF
cat "$RUNDIR/results.md"
echo
echo "written: $RUNDIR/{results.md,raw.csv,machine.txt}"
