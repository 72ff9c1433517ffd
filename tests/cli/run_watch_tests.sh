#!/usr/bin/env bash
# End-to-end tests of `firstfault watch`: logs written incrementally by this script while watch runs.
# Checks the alert and its latency, rotation and truncation with no lost or doubled line, metrics
# scraped over HTTP on loopback, the webhook received by a local listener, --exec, silence detection,
# and the history across two runs. Usage: run_watch_tests.sh BIN
set -u
BIN=$1
tmp=$(mktemp -d)
export XDG_DATA_HOME=$tmp/data
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
# check, port, wait_for; readiness: the metrics endpoint reports the followed files once watch has opened them
# (metric, wait_metric_ge: polled, no fixed wait)
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

mkdir -p "$tmp/job"
for r in 0 1 2 3; do echo "[rank$r]: booting" >"$tmp/job/rank$r.log"; done
MPORT=$(port); HPORT=$(port)
# a local webhook listener that appends every POST body to a file
/usr/bin/python3 "$(dirname "$0")/webhook_listener.py" "$HPORT" "$tmp/webhook.jsonl" &
pids+=($!)
"$BIN" watch "$tmp/job" --json --silence 2s --poll-ms 50 --run-for 30 --metrics "127.0.0.1:$MPORT" \
  --webhook "http://127.0.0.1:$HPORT/alerts" --exec "cat >> $tmp/exec.jsonl" >"$tmp/alerts.jsonl" 2>"$tmp/watch.err" &
wpid=$!; pids+=($wpid)
wait_metric_ge firstfault_files_followed 4 || echo "     watch did not become ready"
written=0
for i in $(seq 1 20); do  # healthy progress; lines split across two writes must still be one line each
  for r in 0 1 2 3; do printf '[rank%s]: step %s loss ' "$r" "$i" >>"$tmp/job/rank$r.log"; printf '1.%s\n' "$i" >>"$tmp/job/rank$r.log"; written=$((written + 1)); done
done
wait_metric_ge firstfault_lines_read_total "$written"  # read so far before the file is rotated
# rotation: rank1.log is renamed and a new rank1.log continues
mv "$tmp/job/rank1.log" "$tmp/job/rank1.log.1"
for i in $(seq 21 25); do echo "[rank1]: step $i loss 0.9" >>"$tmp/job/rank1.log"; written=$((written + 1)); done
wait_metric_ge firstfault_lines_read_total "$written"  # copytruncate loses what was not read yet: wait for it
# copytruncate: rank3.log is truncated in place, then written again
: >"$tmp/job/rank3.log"
check "copytruncate is noticed before the file is written again" wait_metric_ge 'firstfault_file_restarts_total{reason="truncated"}' 1
for i in $(seq 21 25); do echo "[rank3]: step $i loss 0.9" >>"$tmp/job/rank3.log"; written=$((written + 1)); done
wait_metric_ge firstfault_lines_read_total "$written"
# the decisive line
t0=$(date +%s%3N)
echo "gpu-node-7: [rank2]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which 3.25 MiB is free." >>"$tmp/job/rank2.log"
written=$((written + 1))
check "failure alert raised" wait_for "$tmp/alerts.jsonl" '"type":"failure"'
lat=$(/usr/bin/python3 - "$tmp/alerts.jsonl" "$t0" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if j["alert"]["type"] == "failure":
        print(j["alert"]["detected_at_ms"] - int(sys.argv[2])); break
PY
)
echo "     alert latency: ${lat} ms"
# Latency is measured in bench/watch_bench.py (a benchmark, not a timed test); here it is only printed.
check "alert carries its detection time" test -n "${lat}"
check "alert names cuda_oom on rank 2" /usr/bin/python3 -c '
import json,sys
j=[json.loads(l) for l in open(sys.argv[1]) if "\"failure\"" in l][0]
sys.exit(0 if j["root_cause"]["kind"]=="cuda_oom" and j["initiating_rank"]==2 else 1)' "$tmp/alerts.jsonl"
wait_metric_ge firstfault_lines_read_total "$written"
m=$(curl -s "http://127.0.0.1:$MPORT/metrics")
lines=$(printf '%s\n' "$m" | awk '/^firstfault_lines_read_total/ {print $2}')
echo "     lines written after start: $written, read: $lines"
check "no line lost or doubled across rotation and truncation" test "$lines" = "$written"
check "an alert counts the files it follows (not 'from 0 input(s)')" /usr/bin/python3 -c '
import json, sys
a = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
sys.exit(0 if a and all(len(x.get("report", x).get("inputs", [])) >= 1 for x in a) else 1)' "$tmp/alerts.jsonl"
check "metrics: signature hits by rank" grep -q 'firstfault_signature_hits_total{signature="cuda_oom",kind="cuda_oom",rank="2"' <<<"$m"
check "metrics: alerts counted" grep -q 'firstfault_alerts_total{type="failure"} 1' <<<"$m"
check "metrics: seconds since each rank's last line" grep -q 'firstfault_rank_seconds_since_last_line{rank="2"}' <<<"$m"
check "webhook received the alert" wait_for "$tmp/webhook.jsonl" '"cuda_oom"'
check "--exec received the alert" wait_for "$tmp/exec.jsonl" '"cuda_oom"'
# Silence after a failure: ranks 0,1,3 keep writing while rank 2 (dead of its OOM) stays silent past --silence,
# as watch itself measures it. No hang alert: a rank that failed is not hanging. The last line is read and
# watch is stopped; its last pass (read, then the silence check) is complete before it exits.
i=26
while :; do
  for r in 0 1 3; do echo "[rank$r]: step $i" >>"$tmp/job/rank$r.log"; written=$((written + 1)); done
  i=$((i + 1))
  s2=$(metric 'firstfault_rank_seconds_since_last_line{rank="2"}')
  [ -n "$s2" ] && [ "${s2%.*}" -ge 3 ] && break
  [ $i -gt 2000 ] && break
  sleep 0.05  # paces the job's writes (a job that keeps training), not a wait for watch
done
wait_metric_ge firstfault_lines_read_total "$written"
kill -INT $wpid 2>/dev/null; wait $wpid 2>/dev/null
check "no possible-hang alert for the rank that died (nor for the job's silence after the failure)" sh -c "! grep -q '\"type\":\"hang\"' '$tmp/alerts.jsonl'"
check "watch stored the failure in the history" sh -c "'$BIN' history list --format json | grep -q cuda_oom"

# A silent rank with no failure: ranks 0,1,2 go on, rank 3 stops writing: a possible hang, with its last line.
mkdir -p "$tmp/job2"
for r in 0 1 2 3; do echo "[rank$r]: step 1" >"$tmp/job2/rank$r.log"; done
MPORT=$(port)
"$BIN" watch "$tmp/job2" --json --silence 2s --poll-ms 50 --run-for 60 --metrics "127.0.0.1:$MPORT" --no-history \
  >"$tmp/alerts2.jsonl" 2>"$tmp/watch2.err" &
wpid=$!; pids+=($wpid)
wait_metric_ge firstfault_files_followed 4 || echo "     watch did not become ready"
echo "[rank3]: step 2 loss 0.7" >>"$tmp/job2/rank3.log"
for i in $(seq 2 600); do
  for r in 0 1 2; do echo "[rank$r]: step $i" >>"$tmp/job2/rank$r.log"; done
  grep -q '"type":"hang"' "$tmp/alerts2.jsonl" 2>/dev/null && break
  sleep 0.05  # the job's pace
done
check "a silent rank without a failure is reported as a possible hang" grep -q '"type":"hang"' "$tmp/alerts2.jsonl"
kill -INT $wpid 2>/dev/null; wait $wpid 2>/dev/null

# The same silence as text: the alert says what was read, never "verdict: healthy" under "possible hang".
mkdir -p "$tmp/job2t"
for r in 0 1; do echo "[rank$r]: step 1" >"$tmp/job2t/rank$r.log"; done
MPORT=$(port)
"$BIN" watch "$tmp/job2t" --silence 2s --poll-ms 50 --run-for 60 --metrics "127.0.0.1:$MPORT" --no-history \
  >"$tmp/alerts2t.txt" 2>"$tmp/watch2t.err" &
wpid=$!; pids+=($wpid)
wait_metric_ge firstfault_files_followed 2 || echo "     watch did not become ready"
echo "[rank1]: step 2 loss 0.7" >>"$tmp/job2t/rank1.log"
for i in $(seq 2 600); do
  echo "[rank0]: step $i" >>"$tmp/job2t/rank0.log"
  grep -q 'possible hang' "$tmp/alerts2t.txt" 2>/dev/null && break
  sleep 0.05
done
kill -INT $wpid 2>/dev/null; wait $wpid 2>/dev/null
check "a text hang alert names the silent rank" grep -q 'possible hang: rank 1' "$tmp/alerts2t.txt"
check "a text hang alert does not say healthy" sh -c "! grep -q 'verdict: healthy' '$tmp/alerts2t.txt'"
check "a text hang alert says no failure line was read yet" grep -q 'no failure line yet' "$tmp/alerts2t.txt"

# Text alerts: the first failure alert is the whole report with a wall-clock time in its header; a later
# update is one line.
mkdir -p "$tmp/job3"
for r in 0 1 2 3; do echo "[rank$r]: step 1" >"$tmp/job3/rank$r.log"; done
MPORT=$(port)
"$BIN" watch "$tmp/job3" --poll-ms 50 --run-for 60 --metrics "127.0.0.1:$MPORT" --no-history >"$tmp/alerts3.txt" 2>"$tmp/watch3.err" &
wpid=$!; pids+=($wpid)
wait_metric_ge firstfault_files_followed 4 || echo "     watch did not become ready"
echo "gpu-node-7: [rank2]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which 3.25 MiB is free." >>"$tmp/job3/rank2.log"
wait_for "$tmp/alerts3.txt" "^FIX" >/dev/null
for r in 0 1 3; do
  echo "[rank$r]: [E ProcessGroupNCCL.cpp:475] [Rank $r] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600061 milliseconds before timing out." >>"$tmp/job3/rank$r.log"
done
wait_for "$tmp/alerts3.txt" "update alert at" >/dev/null
kill -INT $wpid 2>/dev/null; wait $wpid 2>/dev/null
check "text: the failure alert's header has a UTC wall-clock time" grep -qE '^== firstfault watch: failure alert at 20[0-9]{2}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} UTC$' "$tmp/alerts3.txt"
check "text: the report is printed once, an update is one line" sh -c "test \$(grep -c '^FIX' '$tmp/alerts3.txt') -eq 1 && grep -qE '^== firstfault watch: update alert at .*UTC: failure .*cuda_oom.*collateral group' '$tmp/alerts3.txt'"

# a second run over the same job (from the start) on the same history: the recurrence is noticed
"$BIN" diagnose "$tmp/job" >"$tmp/diag.txt" 2>/dev/null
check "history across runs: recurrence mentioned" grep -q "same failure 1 time(s)" "$tmp/diag.txt"

# watch looks up recurrences the same way (pipeline::options::recurrences): the watch and the diagnose
# above each stored this failure once
MPORT=$(port)
"$BIN" watch "$tmp/job" --from-start --json --poll-ms 50 --run-for 60 --metrics "127.0.0.1:$MPORT" >"$tmp/alerts4.jsonl" 2>"$tmp/watch4.err" &
wpid=$!; pids+=($wpid)
check "watch: failure alert on a job read from the start" wait_for "$tmp/alerts4.jsonl" '"type":"failure"'
kill -INT $wpid 2>/dev/null; wait $wpid 2>/dev/null
check "watch: the alert counts the earlier failures on the same host" grep -q '"recurrences":{"count":2,"days":7}' "$tmp/alerts4.jsonl"

# A Kubernetes pod log (CRI format) where the runtime split the OOM line into P records: watch joins them
# as diagnose does, so the alert names cuda_oom, not the catch-all exception.
mkdir -p "$tmp/pod"
{
  echo '2024-05-01T10:00:00.000000001Z stdout F [rank0]: step 1 loss 2.1'
  echo '2024-05-01T10:00:01.000000001Z stderr F [rank0]: Traceback (most recent call last):'
  echo '2024-05-01T10:00:01.000000002Z stderr F [rank0]:   File "/w/train.py", line 10, in <module>'
  echo '2024-05-01T10:00:01.000000003Z stderr P [rank0]: torch.OutOfMemoryError: CUDA out of'
  echo '2024-05-01T10:00:01.000000004Z stderr P  memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity'
  echo '2024-05-01T10:00:01.000000005Z stderr F  of 79.15 GiB of which 1.02 GiB is free.'
  echo '2024-05-01T10:00:02.000000001Z stdout F [rank0]: exiting'
} >"$tmp/pod/0.log"
MPORT=$(port)
"$BIN" watch "$tmp/pod" --from-start --json --poll-ms 50 --run-for 60 --no-history --metrics "127.0.0.1:$MPORT" >"$tmp/alerts5.jsonl" 2>"$tmp/watch5.err" &
wpid=$!; pids+=($wpid)
check "watch: CRI partial records joined (pod log alert)" wait_for "$tmp/alerts5.jsonl" '"type":"failure"'
kill -INT $wpid 2>/dev/null; wait $wpid 2>/dev/null
check "watch: the joined OOM is cuda_oom" grep -q '"kind":"cuda_oom"' "$tmp/alerts5.jsonl"

echo "$fails failure(s)"
exit $((fails > 0))
