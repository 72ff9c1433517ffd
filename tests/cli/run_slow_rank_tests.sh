#!/usr/bin/env bash
# Slow ranks (stragglers.hpp) end to end: `diagnose` on logs recorded from real 4-rank torchrun jobs with one
# slow rank (tests/slow_rank/, recorded by make_logs.sh), and `watch` on a job written by this script while
# watch follows it: the slow_rank alert comes once, before the job ends, with its Prometheus metrics.
# Usage: run_slow_rank_tests.sh BIN TESTS_DIR
set -u
BIN=$1
T=$2
tmp=$(mktemp -d)
export XDG_DATA_HOME=$tmp/data
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # check, port, metric, wait_metric_ge
json() { /usr/bin/python3 -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"; }

# diagnose: a healthy run with a slow rank stays healthy (exit 0) and names the rank as a warning
"$BIN" diagnose --no-history "$T/slow_rank/healthy/console.log" >"$tmp/h.txt" 2>&1
check "healthy run with a slow rank: exit 0" test $? -eq 0
check "healthy run with a slow rank: verdict healthy" grep -q "^verdict: healthy" "$tmp/h.txt"
check "healthy run with a slow rank: the warning names rank 2" grep -qE "^warning: slow rank: rank 2 0\.[0-9]+ s/step vs median 0\.0[0-9] s/step of 3 other ranks" "$tmp/h.txt"
"$BIN" diagnose --no-history --format json "$T/slow_rank/healthy/console.log" >"$tmp/h.json" 2>/dev/null
check "json: slow_ranks names rank 2 only" json "$tmp/h.json" 'r["verdict"]=="healthy" and [s["rank"] for s in r["slow_ranks"]]==[2] and r["slow_ranks"][0]["seconds_per_step"] > 3*r["slow_ranks"][0]["others_seconds_per_step"]'
check "json validates against the schema" sh -c "/usr/bin/python3 '$T/cli/validate_report.py' <'$tmp/h.json' >/dev/null"
"$BIN" diagnose --no-history --format markdown "$T/slow_rank/healthy/console.log" >"$tmp/h.md" 2>/dev/null
check "markdown names the slow rank" grep -q '^- \*\*Slow rank:\*\* rank 2 ' "$tmp/h.md"
"$BIN" diagnose --no-history --format html "$T/slow_rank/healthy/console.log" >"$tmp/h.html" 2>/dev/null
check "html names the slow rank" grep -q 'class="slow-rank">rank 2 ' "$tmp/h.html"

# diagnose: the same job whose all_gather timed out: the verdict is the timeout's (rank 2, unchanged by the
# straggler fact), and the slow rank is a fact of the report
"$BIN" diagnose --no-history --format json "$T/slow_rank/timeout/console.log" >"$tmp/t.json" 2>/dev/null
check "timeout run: failure, straggler_timeout, rank 2" json "$tmp/t.json" 'r["verdict"]=="failure" and r["root_cause"]["kind"]=="straggler_timeout" and r["initiating_rank"]==2'
check "timeout run: rank 2 was slow before the timeout" json "$tmp/t.json" '[s["rank"] for s in r["slow_ranks"]]==[2]'

# watch: 4 ranks, rank 2 steps 1.0 s apart (by its lines' own times), the others 0.3 s. Each step is written
# once watch has read the previous one (its lines counter: a readiness signal, no fixed wait).
MPORT=$(port)
mkdir -p "$tmp/job"
for r in 0 1 2 3; do : >"$tmp/job/rank$r.log"; done
"$BIN" watch "$tmp/job" --json --poll-ms 50 --run-for 120 --no-history --metrics "127.0.0.1:$MPORT" >"$tmp/alerts.jsonl" 2>"$tmp/watch.err" &
wpid=$!; pids+=($wpid)
wait_metric_ge firstfault_files_followed 4 || echo "     watch did not become ready"
line() {  # line RANK STEP SECONDS-SINCE-START TEXT
  /usr/bin/python3 -c 'import sys,time; t=1765000000+float(sys.argv[3]); print(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) + ",%03d [INFO] [rank%s] %s" % (int(t*1000)%1000, sys.argv[1], sys.argv[4].replace("STEP", sys.argv[2])))' "$@"
}
written=0 last=300 alerted_at=""
for s in $(seq 0 $last); do
  for r in 0 1 2 3; do
    per=0.3; [ $r = 2 ] && per=1.0
    line $r $s "$(echo "$s * $per" | bc -l)" "step STEP/$last loss 0.5" >>"$tmp/job/rank$r.log"
    written=$((written + 1))
  done
  wait_metric_ge firstfault_lines_read_total "$written" || break
  if grep -q '"type":"slow_rank"' "$tmp/alerts.jsonl" 2>/dev/null; then alerted_at=$s; break; fi
done
check "watch: a slow_rank alert while the job runs (step ${alerted_at:-none} of $last)" test -n "$alerted_at"
# 20 more steps after the alert: no second alert for the same rank
for s in $(seq $((${alerted_at:-0} + 1)) $((${alerted_at:-0} + 20))); do
  for r in 0 1 2 3; do
    per=0.3; [ $r = 2 ] && per=1.0
    line $r $s "$(echo "$s * $per" | bc -l)" "step STEP/$last loss 0.5" >>"$tmp/job/rank$r.log"
    written=$((written + 1))
  done
done
wait_metric_ge firstfault_lines_read_total "$written"
# the metrics follow the step times (refreshed about once a second: wait for the step count to be current)
t=0; while [ "$(metric firstfault_slow_ranks)" != 1 ] && [ $t -lt 200 ]; do sleep 0.05; t=$((t + 1)); done
check "metrics: one slow rank" test "$(metric firstfault_slow_ranks)" = 1
check "metrics: rank 2 steps 1 s apart" sh -c "curl -s http://127.0.0.1:$MPORT/metrics | grep -qE '^firstfault_rank_step_seconds\{rank=\"2\"\} 1\.0'"
check "metrics: rank 0 steps 0.3 s apart" sh -c "curl -s http://127.0.0.1:$MPORT/metrics | grep -qE '^firstfault_rank_step_seconds\{rank=\"0\"\} 0\.(29|30)'"
kill -INT $wpid 2>/dev/null; wait $wpid 2>/dev/null
check "watch: the slow_rank alert came once" test "$(grep -c '"type":"slow_rank"' "$tmp/alerts.jsonl")" -eq 1
check "watch: the alert names rank 2 and no failure was raised" json "$tmp/alerts.jsonl" 'r["alert"]["type"]=="slow_rank" and r["alert"]["slow_ranks"]==[2] and r["verdict"]=="healthy" and r["slow_ranks"][0]["rank"]==2'
check "watch: no other alert" sh -c "! grep -v '\"type\":\"slow_rank\"' '$tmp/alerts.jsonl' | grep -q alert"

echo "$fails failure(s)"
exit $((fails > 0))
