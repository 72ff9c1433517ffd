#!/usr/bin/env bash
# Tests of contrib/kubernetes/ without a cluster: recorded `kubectl logs --prefix --timestamps` output of a
# two-pod PyTorchJob (fixtures/k8s-pytorchjob: worker-0's container restarted once after a CUDA OOM on
# rank 1, master-0 then hit the NCCL watchdog timeout) is diagnosed as it is, split by the collector and
# diagnosed, and served by a fake kubectl (fixtures/k8s-pytorchjob/bin/kubectl, first on PATH) to the live
# collector and to the CronJob hook; the manifests are checked offline. No network, no /work/shared.
# Usage: kubernetes_test.sh FIRSTFAULT_BIN
# shellcheck disable=SC2317  # the helpers are called through check "$@"
set -u
BIN=$(readlink -f "$1")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
FX=$here/fixtures/k8s-pytorchjob
K8S=$root/contrib/kubernetes
COLLECT=$K8S/collect-job-logs.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_DATA_HOME=$tmp/data XDG_CONFIG_HOME=$tmp/config XDG_CACHE_HOME=$tmp/cache FIRSTFAULT=$BIN
# a kubeconfig with no cluster: a real kubectl reached by mistake cannot talk to anything
printf 'apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n' >"$tmp/kubeconfig"
export KUBECONFIG=$tmp/kubeconfig
REAL_PATH=$PATH
FAKE_PATH=$FX/bin:$PATH
fails=0
checks=0
check() {
  local name=$1
  shift
  checks=$((checks + 1))
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
# q FILE EXPR: true when the Python expression holds for the JSON document j in FILE
# calls EXPR: true when it holds for c, the fake kubectl's calls (a list of argument lists); $ARG is os.environ["ARG"]
cat >"$tmp/q.py" <<'PY'
import json, os, sys
if sys.argv[1] == "json":
    j = json.load(open(sys.argv[2]))
else:
    c = [json.loads(l) for l in open(sys.argv[2])]
sys.exit(0 if eval(sys.argv[3].strip()) else 1)
PY
Q=(python3 "$tmp/q.py")
q() { "${Q[@]}" json "$1" "$2"; }
calls() { "${Q[@]}" calls "$tmp/kubectl.calls" "$1"; }
is_oom_rank1() { q "$1" 'j["verdict"] == "failure" and j["root_cause"]["kind"] == "cuda_oom" and j["initiating_rank"] == 1'; }
watchdog_collateral() {
  q "$1" 'any(c["signature"] == "torch_nccl_watchdog_timeout" and c["ranks"] == [0] and c["role"] == "symptom" and "collateral of rank 1" in c["explanation"] for c in j["collateral"])'
}
first_last_kept() {  # trimmed file $1 keeps the first and the last line of $2, and the marker between
  [ "$(head -1 "$1")" = "$(head -1 "$2")" ] && [ "$(tail -1 "$1")" = "$(tail -1 "$2")" ] &&
    grep -q '^\[collect-job-logs: .* left out here (--limit-bytes 4096)' "$1" && [ "$(wc -c <"$1")" -le 4300 ]
}
# the recorded streams, one container instance's lines each: what the split must produce
expect_lines() { grep -c "^\[pod/$2/$3\] " "$FX/$1"; }

# --- 1. firstfault on the recorded stream as it is ([pod/NAME/CONTAINER] RFC3339Nano message)
"$BIN" diagnose "$FX/kubectl-logs-prefix.txt" "$FX/kubectl-logs-prefix-previous.txt" --no-history --no-mask \
  --format json >"$tmp/direct.json" 2>"$tmp/direct.err"
check "prefixed stream: exit status 1 (failure diagnosed)" test $? -eq 1
check "prefixed stream: root cause cuda_oom on rank 1" is_oom_rank1 "$tmp/direct.json"
check "prefixed stream: [pod/NAME/CONTAINER] is peeled and names the pod as the host" \
  q "$tmp/direct.json" 'j["initiating_host"] == "llama-ft-worker-0"'
check "prefixed stream: the RFC3339Nano time is peeled and read (evidence at 10:12:03.413)" \
  q "$tmp/direct.json" 'j["root_cause"]["evidence"][0]["text"].startswith("torch.OutOfMemoryError: CUDA out of memory.") and j["root_cause"]["evidence"][0]["time"] == "2024-05-01 10:12:03.413"'
check "prefixed stream: master-0's NCCL watchdog timeout (rank 0) is collateral of rank 1's OOM" watchdog_collateral "$tmp/direct.json"

# --- 2. split mode on the recorded files, with the recorded pods and events
"$COLLECT" split -o "$tmp/split" "$FX/kubectl-logs-prefix.txt" --previous "$FX/kubectl-logs-prefix-previous.txt" \
  --pods-json "$FX/pods.json" --events-json "$FX/events.json" --job-name llama-ft --print json >"$tmp/split.json" 2>"$tmp/split.err"
check "split: exit status 1 (firstfault's: failure diagnosed)" test $? -eq 1
S=$tmp/split/logs
check "split: one file per pod, container and instance" test "$(cd "$S" && find . -type f | sort | tr '\n' ' ')" = \
  "./k8s-events.log ./k8s-status.log ./llama-ft-master-0/pytorch.log ./llama-ft-worker-0/init-pytorch.log ./llama-ft-worker-0/pytorch.log ./llama-ft-worker-0/pytorch.previous.log "
check "split: every line lands in its file (counts match the recorded streams)" sh -c "
  [ \$(wc -l <'$S/llama-ft-master-0/pytorch.log') -eq $(expect_lines kubectl-logs-prefix.txt llama-ft-master-0 pytorch) ] &&
  [ \$(wc -l <'$S/llama-ft-worker-0/init-pytorch.log') -eq $(expect_lines kubectl-logs-prefix.txt llama-ft-worker-0 init-pytorch) ] &&
  [ \$(wc -l <'$S/llama-ft-worker-0/pytorch.log') -eq $(expect_lines kubectl-logs-prefix.txt llama-ft-worker-0 pytorch) ] &&
  [ \$(wc -l <'$S/llama-ft-worker-0/pytorch.previous.log') -eq $(expect_lines kubectl-logs-prefix-previous.txt llama-ft-worker-0 pytorch) ]"
check "split: files hold kubectl logs --timestamps lines (prefix removed, RFC3339 time first)" sh -c \
  "! cat '$S'/llama-ft-*/*.log | grep -vqE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z '"
check "split: the OOM is in the previous instance's file" grep -q 'torch.OutOfMemoryError: CUDA out of memory' "$S/llama-ft-worker-0/pytorch.previous.log"
check "split: root cause cuda_oom on rank 1" is_oom_rank1 "$tmp/split.json"
check "split: the watchdog timeout is collateral" watchdog_collateral "$tmp/split.json"
check "split: one-line verdict written" grep -q '^failure kind=cuda_oom rank=1 ' "$tmp/split/verdict.txt"
check "split: the restart is in k8s-status.log (previous instance, exit code 1)" grep -qF \
  '[pod/llama-ft-worker-0/pytorch] 2024-05-01T10:12:06Z Container pytorch (previous instance, restarts: 1) Terminated, Reason: Error, Exit Code: 1' "$S/k8s-status.log"
check "split: k8s-events.log has the job's and its pods' events only, in time order" sh -c "
  grep -q 'Warning BackOff Pod/llama-ft-worker-0: Back-off restarting failed container' '$S/k8s-events.log' &&
  grep -q 'PyTorchJobFailed PyTorchJob/llama-ft:' '$S/k8s-events.log' && ! grep -q resnet '$S/k8s-events.log' &&
  LC_ALL=C sort -c -s -k1,1 '$S/k8s-events.log'"
"$BIN" diagnose "$S" --no-history --format json >"$tmp/split-direct.json" 2>/dev/null
check "split: firstfault diagnose OUTDIR/logs (no scan) agrees" is_oom_rank1 "$tmp/split-direct.json"
if q "$tmp/split-direct.json" 'j["initiating_host"] is None'; then
  echo "     note: without the prefix the split files name no host (firstfault takes a host from a file's name, not from its directory logs/<pod>/): initiating_host is null; --keep-prefix keeps it"
fi

# --- 3. split from stdin; --keep-prefix
"$COLLECT" split -o "$tmp/stdin" --no-diagnose - --previous "$FX/kubectl-logs-prefix-previous.txt" <"$FX/kubectl-logs-prefix.txt" 2>/dev/null
check "split from stdin gives the same files" diff -r -x 'k8s-*.log' "$S" "$tmp/stdin/logs"
"$COLLECT" split -o "$tmp/keep" --keep-prefix --no-mask --print brief --previous "$FX/kubectl-logs-prefix-previous.txt" \
  <"$FX/kubectl-logs-prefix.txt" >"$tmp/keep.brief" 2>/dev/null
check "split --keep-prefix: the pod is named as the host" grep -q '^failure kind=cuda_oom rank=1 host=llama-ft-worker-0 ' "$tmp/keep.brief"
"$COLLECT" split -o "$tmp/split-brief" --redact --print brief "$FX/kubectl-logs-prefix.txt" --previous "$FX/kubectl-logs-prefix-previous.txt" \
  >"$tmp/masked.brief" 2>/dev/null
# No pod, node or address anywhere in the masked reports, the launcher note included (it quotes an exit
# record's file, which was opened before the pod's name was learnt from a prefix: a leak until the second
# masking pass covered records too).
leaks() { grep -hE 'llama-ft-(master|worker)-0|gpu-node|10\.244\.' "$tmp/split-brief/report.txt" "$tmp/split-brief/report.json"; }
masked() { ! leaks | grep -q .; }
check "split --redact: reports are masked (no pod or node name anywhere)" masked
printf '[pod/../etc] x\n[pod/a/b/c] y\nplain line\n[pod/ok-0/c1] 2024-05-01T10:00:00Z fine\n' |
  "$COLLECT" split -o "$tmp/hostile" --no-diagnose - 2>/dev/null
check "split: names that are not Kubernetes names never become paths" sh -c \
  "[ \"\$(cd '$tmp/hostile/logs' && find . -type f | sort | tr '\n' ' ')\" = './ok-0/c1.log ./unprefixed.log ' ] && [ \$(wc -l <'$tmp/hostile/logs/unprefixed.log') -eq 3 ]"

# --- 4. the live collector against the fake kubectl (first on PATH)
export FAKE_KUBECTL_LOG=$tmp/kubectl.calls
PATH=$FAKE_PATH "$COLLECT" collect -n ml-research --pytorchjob llama-ft -o "$tmp/live" --print json >"$tmp/live.json" 2>"$tmp/live.err"
check "live: exit status 1 (failure diagnosed)" test $? -eq 1
check "live: kubectl found on PATH is the fake" calls 'len(c) > 0'
check "live: pods listed with -l training.kubeflow.org/job-name=llama-ft" \
  calls '["get", "pods", "-n", "ml-research", "-l", "training.kubeflow.org/job-name=llama-ft", "-o", "json"] in [x[1:] for x in c]'
check "live: worker-0's restarted container fetched with --previous" \
  calls 'any("logs" in x and "llama-ft-worker-0" in x and "pytorch" in x and "--previous" in x and "--timestamps" in x for x in c)'
check "live: no --previous for containers that never restarted" \
  calls 'not any("--previous" in x and ("llama-ft-master-0" in x or "init-pytorch" in x) for x in c)'
check "live: every kubectl call has a request timeout, every logs call a byte cap" \
  calls 'all(x[0].startswith("--request-timeout=") for x in c) and all(any(a.startswith("--limit-bytes=") for a in x) for x in c if "logs" in x)'
check "live: the same files as the split of the recorded stream" diff -r "$S" "$tmp/live/logs"
check "live: root cause cuda_oom on rank 1" is_oom_rank1 "$tmp/live.json"
check "live: the watchdog timeout is collateral" watchdog_collateral "$tmp/live.json"
check "live: the raw objects kept beside the logs (pods, job, the job's events only)" sh -c \
  "test -s '$tmp/live/k8s/pods.json' && test -s '$tmp/live/k8s/job.json' && ! grep -q resnet '$tmp/live/k8s/events.json'"

# --- 5. bounds: bytes per container, kubectl time-outs
: >"$tmp/kubectl.calls"
PATH=$FAKE_PATH "$COLLECT" collect -n ml-research --pytorchjob llama-ft -o "$tmp/capped" --limit-bytes 4096 --no-diagnose 2>/dev/null
check "--limit-bytes (live): a longer log keeps its first and last lines, a marker between" \
  first_last_kept "$tmp/capped/logs/llama-ft-master-0/pytorch.log" "$S/llama-ft-master-0/pytorch.log"
check "--limit-bytes (live): the previous instance's log too" \
  first_last_kept "$tmp/capped/logs/llama-ft-worker-0/pytorch.previous.log" "$S/llama-ft-worker-0/pytorch.previous.log"
check "--limit-bytes (live): the tail comes from kubectl logs --tail" calls 'any(a.startswith("--tail=") for x in c for a in x)'
"$COLLECT" split -o "$tmp/capped-split" --limit-bytes 4096 --no-diagnose "$FX/kubectl-logs-prefix.txt" \
  --previous "$FX/kubectl-logs-prefix-previous.txt" 2>/dev/null
check "--limit-bytes (split): the same head and tail" \
  first_last_kept "$tmp/capped-split/logs/llama-ft-master-0/pytorch.log" "$S/llama-ft-master-0/pytorch.log"
t0=$(date +%s)
PATH=$FAKE_PATH FAKE_KUBECTL_SLOW=llama-ft-master-0/pytorch "$COLLECT" collect -n ml-research --pytorchjob llama-ft \
  -o "$tmp/slow" --timeout 1 --no-diagnose 2>/dev/null
t1=$(date +%s)
check "--timeout: a kubectl logs that hangs is given up after the time-out ($((t1 - t0)) s), the others fetched" sh -c "
  [ $((t1 - t0)) -lt 15 ] && grep -q 'llama-ft-master-0/pytorch: no log: timed out' '$tmp/slow/collect.txt' &&
  [ ! -e '$tmp/slow/logs/llama-ft-master-0' ] && cmp -s '$tmp/slow/logs/llama-ft-worker-0/pytorch.previous.log' '$S/llama-ft-worker-0/pytorch.previous.log'"
: >"$tmp/kubectl.calls"
PATH=$FAKE_PATH "$COLLECT" collect -n ml-research --jobset tpu-pretrain -o "$tmp/js" --no-diagnose 2>/dev/null
check "--jobset: pods listed with -l jobset.sigs.k8s.io/jobset-name=NAME" \
  calls '["get", "pods", "-n", "ml-research", "-l", "jobset.sigs.k8s.io/jobset-name=tpu-pretrain", "-o", "json"] in [x[1:] for x in c]'
check "--jobset: no pods left is said in collect.txt" grep -q 'no pods match' "$tmp/js/collect.txt"

# --- 6. the CronJob hook: report-failed
: >"$tmp/kubectl.calls"
PATH=$FAKE_PATH "$COLLECT" report-failed -n ml-research --reports "$tmp/reports" --max-age-hours 0 --keep-prefix >"$tmp/hook.out" 2>"$tmp/hook.err"
check "report-failed: exit status 0" test $? -eq 0
check "report-failed: the failed PyTorchJob is reported with its one-line verdict" grep -q '^pytorchjob ml-research/llama-ft: failure kind=cuda_oom rank=1 ' "$tmp/hook.out"
check "report-failed: the job is annotated with the verdict and the report's place" env REPORT="$tmp/reports/ml-research/llama-ft-5d3c0e8a" "${Q[@]}" calls "$tmp/kubectl.calls" '
  any(x[1:5] == ["annotate", "pytorchjobs.kubeflow.org", "llama-ft", "-n"] and "firstfault/report=" + os.environ["REPORT"] in x
      and any(a.startswith("firstfault/verdict=failure kind=cuda_oom rank=1 ") for a in x) for x in c)'
check "report-failed: the report directory holds the reports and the logs" sh -c \
  "d='$tmp/reports/ml-research/llama-ft-5d3c0e8a'; test -s \$d/report.txt && test -s \$d/report.json && test -s \$d/verdict.txt && test -s \$d/logs/llama-ft-worker-0/pytorch.previous.log"
check "report-failed: an annotated job and a succeeded job are left alone" \
  calls 'not any(("gpt-eval-1" in x or "resnet-sweep-3" in x) for x in c) and not any(a.endswith("gpt-eval-1") or a.endswith("resnet-sweep-3") for x in c for a in x)'
check "report-failed: a failed JobSet whose pods are gone is reported as undetermined" \
  grep -q '^jobset ml-research/tpu-pretrain: undetermined: no pod logs could be collected' "$tmp/hook.out"
check "report-failed: ... and annotated, so it is not retried" \
  calls 'any(x[1:4] == ["annotate", "jobsets.jobset.x-k8s.io", "tpu-pretrain"] for x in c)'
: >"$tmp/kubectl.calls"
PATH=$FAKE_PATH "$COLLECT" report-failed -n ml-research --reports "$tmp/reports" --max-age-hours 0 >"$tmp/hook2.out" 2>&1
check "report-failed: a second run reports nothing again (the report directory marks the job done)" sh -c "
  grep -q 'no failed job without a firstfault/verdict annotation' '$tmp/hook2.out' && ! grep -q '\"logs\"' '$tmp/kubectl.calls'"
PATH=$FAKE_PATH "$COLLECT" report-failed -n ml-research --reports "$tmp/reports-old" >"$tmp/hook3.out" 2>&1
check "report-failed: failures older than --max-age-hours (72 by default) are skipped" grep -q 'no failed job without' "$tmp/hook3.out"
PATH=$FAKE_PATH FAKE_KUBECTL_DENY=annotate "$COLLECT" report-failed -n ml-research --kinds pytorchjob --reports "$tmp/reports-deny" \
  --max-age-hours 0 >"$tmp/hook4.out" 2>"$tmp/hook4.err"
check "report-failed: a refused annotation is an error (exit 6) but the report is kept" sh -c \
  "[ $? -eq 6 ] && test -s '$tmp/reports-deny/ml-research/llama-ft-5d3c0e8a/verdict.txt' && grep -q Forbidden '$tmp/hook4.err'"
# --- 6b. the action: annotated on the job; opt-in, the nodes a restart-excluding-hosts action names are
# cordoned and tainted (the exact kubectl commands), and no other node is touched
check "report-failed: the OOM job is annotated with its action (stop-fix-config, no hosts)" calls '
  any(x[1:3] == ["annotate", "pytorchjobs.kubeflow.org"] and "firstfault/action=stop-fix-config" in x and "firstfault/action-hosts=" in x for x in c)'
: >"$tmp/kubectl.calls"
PATH=$FAKE_PATH "$COLLECT" report-failed -n ml-research --kinds pytorchjob --reports "$tmp/reports-oom-cordon" --max-age-hours 0 \
  --cordon --taint firstfault.io/action=restart-excluding-hosts:NoSchedule >"$tmp/hook5.out" 2>&1
check "report-failed --cordon: a CUDA OOM (stop-fix-config) cordons and taints nothing" \
  calls 'not any(x[1] in ("cordon", "taint") for x in c)'
XFX=$tmp/fx-ecc  # the same job, but rank 1's GPU reports an uncorrectable ECC error instead of the OOM
cp -r "$FX" "$XFX"
sed -i 's/\[rank1\]: torch.OutOfMemoryError: CUDA out of memory\..*/[rank1]: RuntimeError: CUDA error: uncorrectable ECC error encountered/' \
  "$XFX/kubectl-logs-prefix-previous.txt"
: >"$tmp/kubectl.calls"
PATH=$XFX/bin:$PATH "$COLLECT" report-failed -n ml-research --kinds pytorchjob --reports "$tmp/reports-ecc" --max-age-hours 0 \
  --cordon --taint firstfault.io/action=restart-excluding-hosts:NoSchedule >"$tmp/hook6.out" 2>"$tmp/hook6.err"
check "report-failed --cordon: exit status 0 on the ECC job" test $? -eq 0
check "report-failed --cordon: the ECC job is diagnosed gpu_ecc_hardware with action restart-excluding-hosts" \
  q "$tmp/reports-ecc/ml-research/llama-ft-5d3c0e8a/report.json" 'j["root_cause"]["kind"] == "gpu_ecc_hardware" and j["action"]["kind"] == "restart-excluding-hosts"'
check "report-failed --cordon: exactly: kubectl cordon gpu-node-22 (worker-0's node)" \
  calls '[x[1:] for x in c if x[1] == "cordon"] == [["cordon", "gpu-node-22"]]'
check "report-failed --taint: exactly: kubectl taint nodes gpu-node-22 firstfault.io/action=restart-excluding-hosts:NoSchedule --overwrite" \
  calls '[x[1:] for x in c if x[1] == "taint"] == [["taint", "nodes", "gpu-node-22", "firstfault.io/action=restart-excluding-hosts:NoSchedule", "--overwrite"]]'
check "report-failed --cordon: the job is annotated with the action and the node" calls '
  any(x[1:3] == ["annotate", "pytorchjobs.kubeflow.org"] and "firstfault/action=restart-excluding-hosts" in x
      and "firstfault/action-hosts=gpu-node-22" in x for x in c)'
check "report-failed --cordon: says what it did" grep -q '^  cordoned gpu-node-22 (action restart-excluding-hosts)' "$tmp/hook6.out"
: >"$tmp/kubectl.calls"
PATH=$XFX/bin:$PATH "$COLLECT" report-failed -n ml-research --kinds pytorchjob --reports "$tmp/reports-ecc-nocordon" --max-age-hours 0 \
  --keep-prefix >/dev/null 2>&1
check "report-failed --keep-prefix without --cordon/--taint: the node is left alone, the action still annotated" calls '
  not any(x[1] in ("cordon", "taint") for x in c) and any("firstfault/action=restart-excluding-hosts" in x for x in c)'

unset FAKE_KUBECTL_LOG

# --- 7. the manifests, offline
manifests=("$K8S"/*.yaml)
checker=(python3 "$here/k8s_manifest_check.py" --firstfault "$BIN" --collector "$K8S/collect-job-logs.py")
parsers=()
if PATH=$REAL_PATH command -v kubectl >/dev/null 2>&1 && PATH=$REAL_PATH kubectl version --client >/dev/null 2>&1; then
  kubectl_bin=$(PATH=$REAL_PATH command -v kubectl)
  check "manifests: parsed by kubectl (label --local, no server) and checked" "${checker[@]}" --kubectl "$kubectl_bin" "${manifests[@]}"
  parsers+=(kubectl)
  last=(--kubectl "$kubectl_bin")
fi
if python3 -c 'import yaml' 2>/dev/null; then
  check "manifests: parsed by PyYAML and checked" "${checker[@]}" "${manifests[@]}"
  parsers+=(PyYAML)
  last=()
fi
if [ ${#parsers[@]} -gt 0 ]; then
  sed -e 's/--metrics=0.0.0.0:9464/--metrics-addr=0.0.0.0:9464/' -e 's/prometheus.io\/port: "9464"/prometheus.io\/port: "9090"/' \
    "$K8S/daemonset.yaml" >"$tmp/broken-daemonset.yaml"
  "${checker[@]}" "${last[@]}" "$tmp/broken-daemonset.yaml" >"$tmp/broken.out"
  check "manifests: the check rejects a DaemonSet with a flag watch lacks and a wrong scrape port" sh -c \
    "[ $? -eq 1 ] && grep -q 'does not accept --metrics-addr' '$tmp/broken.out' && grep -q \"prometheus.io/port '9090'\" '$tmp/broken.out'"
  how="${parsers[*]}"
else
  how=skipped
  echo "skip manifests: neither kubectl nor PyYAML (python3-yaml) is installed to parse them"
fi
check "collector: the wrapper is valid bash, the collector valid Python" sh -c \
  "bash -n '$COLLECT' && python3 -c 'import ast,sys; ast.parse(open(sys.argv[1]).read())' '$K8S/collect-job-logs.py'"

echo "kubernetes: $((checks - fails))/$checks checks passed, $fails failed (manifests parsed with: $how)"
exit $((fails > 0))
