#!/usr/bin/env bash
# The Slurm integration (contrib/slurm/) against a real one-node Slurm (Debian 12: slurm-wlm 22.05 + munge,
# from scripts/install-deps.sh), started here on loopback in a temporary directory and stopped at the end.
#
#   1. the epilog library on its own: Slurm filename patterns, scontrol record fields, the job-state decision
#      (with a stand-in sacct, since this Slurm has no accounting), AdminComment sanitising;
#   2. munged, slurmctld and slurmd on free 127.0.0.1 ports, Epilog / EpilogSlurmctld = the contrib scripts
#      (symlinked next to a test firstfault-slurm.conf);
#   3. jobs: a 2-task job (as user nobody, output %x-%j.out) whose rank 1 dies of a CUDA OOM while rank 0
#      hits the NCCL watchdog; a job-array task with separate, relative StdOut/StdErr patterns (%A %a %N %5j
#      %%) whose cause is only in a torchrun --log-dir (FF_EXTRA_LOGS); a job that completes (no report);
#      a job cancelled while running (the controller sees exit 0:0 then: the nodes' view must win).
#
# usage: slurm_test.sh FIREFAULT_BIN        (root only: prints "skipped: needs root" and exits 77 otherwise)
#        FF_SLURM_TEST_KEEP=1 keeps the temporary directory (logs, spool, reports) for a look afterwards.
set -euo pipefail

if [ "$(id -u)" != 0 ]; then echo "skipped: needs root"; exit 77; fi
if [ $# -ne 1 ] || [ ! -x "$1" ]; then echo "usage: $0 FIREFAULT_BIN" >&2; exit 2; fi
FF=$(readlink -f "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CONTRIB=$REPO/contrib/slurm
T0=$(date +%s.%N)

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "  ok   $*"; }
bad() { failed=$((failed + 1)); echo "  FAIL $*"; }
check() { # check "description" command...
  local what=$1; shift
  if "$@"; then ok "$what"; else bad "$what"; fi
}
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1fs", b - a }'; }
say() { echo "[$(elapsed)] $*"; }

for c in munged munge slurmctld slurmd sbatch srun scontrol sinfo squeue scancel setpriv flock python3; do
  if ! command -v "$c" >/dev/null 2>&1; then
    echo "FAIL: $c not found (scripts/install-deps.sh installs slurm-wlm and munge)"
    exit 1
  fi
done
if ! id munge >/dev/null 2>&1 || ! id nobody >/dev/null 2>&1; then echo "FAIL: users munge and nobody are needed"; exit 1; fi

T=$(mktemp -d /tmp/firstfault-slurm-test.XXXXXX)
chmod 0755 "$T" # munged wants every directory above its socket searchable by all
pids=()
export SLURM_CONF=$T/etc/slurm.conf

dump_logs() {
  local f
  for f in "$T"/log/slurmctld.log "$T"/log/slurmd.log "$T"/log/firstfault-slurm.log "$T"/munge/munged.log; do
    [ -f "$f" ] || continue
    echo "---- last lines of ${f#"$T"/}"
    tail -n 25 "$f" | sed 's/^/    /'
  done
}

cleanup() {
  local rc=$? p i
  set +e
  trap - EXIT INT TERM
  if [ -S "$T/munge/munge.sock" ] && kill -0 "${pids[@]:0:1}" 2>/dev/null; then
    # Jobs first (their slurmstepd would outlive slurmd), bounded.
    # shellcheck disable=SC2046 # one argument per job id
    scancel --quiet --full $(squeue -h -o %i 2>/dev/null) >/dev/null 2>&1
    for ((i = 0; i < 100; i++)); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.2; done
  fi
  for ((p = ${#pids[@]} - 1; p >= 0; p--)); do kill -TERM "${pids[p]}" 2>/dev/null; done
  for p in "${pids[@]}"; do
    for ((i = 0; i < 75; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  if [ "$rc" != 0 ] || [ "$failed" != 0 ]; then dump_logs; fi
  if [ -n "${FF_SLURM_TEST_KEEP:-}" ]; then echo "kept $T (FF_SLURM_TEST_KEEP)"; else rm -rf "$T"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --------------------------------------------------------------------------------------------------------
say "1. epilog library ($CONTRIB/firstfault-slurm-lib.sh)"
lib_expect() { # PATTERN EXPECTED  (FFX_* from the caller)
  local got
  got=$(ff_expand_pattern "$1")
  if [ "$got" = "$2" ]; then ok "expand '$1' -> '$got'"; else bad "expand '$1': got '$got', want '$2'"; fi
}
# shellcheck disable=SC2034 # FF_*/FFX_* are read by the library's functions
(
  set -euo pipefail
  # shellcheck source=../../contrib/slurm/firstfault-slurm-lib.sh
  . "$CONTRIB/firstfault-slurm-lib.sh"
  # The o_, e_, bs and arr_ rows are file names slurmstepd 22.05 created for these patterns (host vm, job 5;
  # array job 6 task 3 = job 8); the others follow its fname.c (width capped at 10, unknown %c kept). Part 3
  # checks %x %j %A %a %N %5j %% again against the files of this run's jobs.
  FFX_JOBID=5 FFX_USER=alice FFX_NAME=pj FFX_HOST=vm FFX_WORKDIR=/w FFX_ARRAY_JOB="" FFX_ARRAY_TASK=""
  lib_expect 'o_%A_%a_%j_%J_%N_%n_%s_%t_%u_%x_%5j_%%_%5a.out' /w/o_5_4294967294_5_5_vm_0_batch_0_alice_pj_00005_%_4294967294.out
  lib_expect 'e_%3x_%j.err' /w/e_pj_5.err
  lib_expect '/abs/%x-%j.out' /abs/pj-5.out
  lib_expect 'bs\\_%j.out' '/w/bs\_%j.out'
  lib_expect '/a/%q_%12j_%' /a/%q_0000000005_%
  lib_expect '%%j%%%j' /w/%j%5
  FFX_JOBID=8 FFX_ARRAY_JOB=6 FFX_ARRAY_TASK=3
  lib_expect 'arr_%A_%a_%4a_%j.out' /w/arr_6_3_0003_8.out

  line='JobId=8 ArrayJobId=6 ArrayTaskId=3 JobName=my job UserId=alice(1000) GroupId=g(1000) JobState=COMPLETING Reason=NonZeroExitCode Dependency=(null) ExitCode=1:0 RunTime=00:00:01 WorkDir=/home/alice/run 1 StdErr=/home/alice/run 1/x.err StdIn=/dev/null StdOut=/home/alice/run 1/x.out Power='
  v=$(ff_field "$line" JobName); [ "$v" = "my job" ] && ok "field JobName with a space" || bad "field JobName: '$v'"
  v=$(ff_field "$line" WorkDir); [ "$v" = "/home/alice/run 1" ] && ok "field WorkDir with a space" || bad "field WorkDir: '$v'"
  v=$(ff_field "$line" Power); [ -z "$v" ] && ok "field empty value" || bad "field Power: '$v'"
  ff_field "$line" Nope >/dev/null && bad "field: missing key found" || ok "field: missing key -> status 1"
  v=$(ff_field "$line" ArrayTaskId); [ "$v" = 3 ] && ok "field ArrayTaskId" || bad "field ArrayTaskId: '$v'"

  FF_ADMIN_COMMENT_MAX=40
  v=$(ff_sanitize_comment $'failure kind=cuda_oom "rank"=1,\x01 host=\'<h>\'\n`x` \\ and a very long tail that is cut')
  [ "$v" = "failure kind=cuda_oom rank=1; host=<h> x" ] && ok "AdminComment sanitised and bounded: '$v'" || bad "sanitise: '$v'"

  # Job state decision; sacct is a stand-in (this Slurm has no slurmdbd).
  fake=$(mktemp -d)
  trap 'rm -rf "$fake"' EXIT
  printf '#!/bin/sh\nprintf "%%s\\n" "$FAKE_SACCT"\n' >"$fake/sacct"
  chmod +x "$fake/sacct"
  PATH=$fake:$PATH
  export FAKE_SACCT=""
  view() { # EXPECTED DESCRIPTION
    ff_job_view 12
    if [ "$FF_VIEW" = "$1" ]; then ok "state: $2 -> $FF_VIEW ($FF_VIEW_WHY)"; else bad "state: $2 -> $FF_VIEW ($FF_VIEW_WHY), want $1"; fi
  }
  FF_USE_SACCT=auto FFX_ARRAY_JOB="" FFX_ARRAY_TASK=""
  unset SLURM_JOB_EXIT_CODE2 SLURM_JOB_DERIVED_EC
  FF_JOBLINE=""
  FAKE_SACCT=$'12|CANCELLED by 0|0:15|n[1-2]\n12.batch|CANCELLED|0:15|n1'; view failed "sacct CANCELLED by 0"
  FAKE_SACCT=$'12|COMPLETED|0:0|n1\n12.batch|COMPLETED|0:0|n1'; view ok "sacct COMPLETED"
  SLURM_JOB_EXIT_CODE2=1:0; view failed "sacct COMPLETED but exit 1:0 in the environment"
  FAKE_SACCT='12|RUNNING|0:0|n1'; SLURM_JOB_EXIT_CODE2=0:0
  FF_JOBLINE='JobId=12 JobName=a JobState=COMPLETING Reason=None ExitCode=0:0 RunTime=1'
  view ok "sacct not final, exit 0:0, scontrol COMPLETING/None"
  FF_JOBLINE='JobId=12 JobName=a JobState=COMPLETING Reason=TimeLimit ExitCode=0:15 RunTime=1'
  view failed "scontrol Reason=TimeLimit ExitCode=0:15"
  FF_JOBLINE='JobId=12 JobName=a JobState=OUT_OF_MEMORY Reason=OutOfMemory ExitCode=0:125 RunTime=1'
  view failed "scontrol OUT_OF_MEMORY"
  FF_USE_SACCT=0 FF_JOBLINE=""; unset SLURM_JOB_EXIT_CODE2
  view unknown "no source at all"
  exit 0
) >"$T/lib.out" 2>&1 || true
cat "$T/lib.out"
passed=$((passed + $(grep -c '^  ok ' "$T/lib.out" || true)))
failed=$((failed + $(grep -c '^  FAIL ' "$T/lib.out" || true)))
if ! grep -q 'state: no source at all' "$T/lib.out"; then bad "library checks did not run to the end"; fi

# --------------------------------------------------------------------------------------------------------
say "2. starting munged, slurmctld, slurmd in $T"
mkdir -p "$T"/{etc,munge,state,spool/slurmd,spool/ff,log,jobs,reports,history,cache}
read -r PCTLD PSLURMD < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
chown munge:munge "$T/munge"
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none
chown munge:munge "$T/munge/munge.key"
chmod 0400 "$T/munge/munge.key"
chown nobody:nogroup "$T/jobs"

cat >"$T/etc/slurm.conf" <<EOF
ClusterName=fftest
SlurmctldHost=localhost
SlurmctldPort=$PCTLD
SlurmdPort=$PSLURMD
AuthType=auth/munge
AuthInfo=socket=$T/munge/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool/slurmd
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$T/log/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
MailProg=/bin/true
# Start queued jobs within a second or two of resources freeing (defaults: 60 s main loop, 30 s backfill).
SchedulerParameters=sched_interval=1,bf_interval=1
ReturnToService=2
PrologEpilogTimeout=300
Epilog=$T/etc/firstfault-epilog.sh
EpilogSlurmctld=$T/etc/firstfault-epilog-slurmctld.sh
NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
# The contrib scripts themselves, symlinked: each finds firstfault-slurm.conf next to the path Slurm runs.
ln -s "$CONTRIB/firstfault-epilog.sh" "$T/etc/firstfault-epilog.sh"
ln -s "$CONTRIB/firstfault-epilog-slurmctld.sh" "$T/etc/firstfault-epilog-slurmctld.sh"
cat >"$T/etc/firstfault-slurm.conf" <<EOF
FF_BIN=$FF
FF_SLURM_BIN_DIR=$(dirname "$(command -v scontrol)")
FF_SLURM_CONF=$T/etc/slurm.conf
FF_SPOOL=$T/spool/ff
FF_REPORT_DIR=$T/reports
FF_REPORT_NEXT_TO_OUTPUT=1
FF_HISTORY=$T/history/history.db
FF_LOG_FILE=$T/log/firstfault-slurm.log
FF_CACHE_DIR=$T/cache
FF_MASK_KEY_FILE=$T/etc/mask.key
FF_EXTRA_LOGS=("$T/jobs/torchrun/%j")
FF_KERNEL_LOG=0
FF_ADMIN_COMMENT=1
FF_ADMIN_COMMENT_MAX=200
FF_WAIT_SECONDS=60
FF_SCAN_TIMEOUT=60
FF_DIAGNOSE_TIMEOUT=60
EOF
chmod 0644 "$T/etc/firstfault-slurm.conf"
printf 'slurm-test-site-key\n' >"$T/etc/mask.key"
chmod 0600 "$T/etc/mask.key"

# wait_for SECONDS DESCRIPTION command...: poll until the command succeeds.
wait_for() {
  local limit=$1 what=$2 end
  shift 2
  end=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= end)); then echo "FAIL: $what: not within ${limit}s"; return 1; fi
    sleep 0.2
  done
}
alive() { kill -0 "$1" 2>/dev/null; }

setpriv --reuid=munge --regid=munge --init-groups munged -F --socket="$T/munge/munge.sock" \
  --key-file="$T/munge/munge.key" --pid-file="$T/munge/munged.pid" --log-file="$T/munge/munged.log" \
  --seed-file="$T/munge/munged.seed" >"$T/log/munged.stdout" 2>&1 &
pids+=($!)
wait_for 30 "munged answers" munge -S "$T/munge/munge.sock" -n || exit 1
slurmctld -D -f "$SLURM_CONF" >"$T/log/slurmctld.stdout" 2>&1 &
pids+=($!)
ctld_up() { alive "${pids[1]}" && scontrol ping | grep -q 'is UP'; }
wait_for 60 "slurmctld answers scontrol ping (port $PCTLD)" ctld_up || exit 1
slurmd -D -N localhost -f "$SLURM_CONF" >"$T/log/slurmd.stdout" 2>&1 &
pids+=($!)
node_idle() { alive "${pids[2]}" && [ "$(sinfo -h -n localhost -o %T)" = idle ]; }
wait_for 60 "node localhost idle" node_idle || exit 1
say "   slurm up: slurmctld 127.0.0.1:$PCTLD, slurmd 127.0.0.1:$PSLURMD, $(sinfo -V)"

# --------------------------------------------------------------------------------------------------------
say "3. jobs"
cat >"$T/jobs/train_task.sh" <<'EOF'
#!/bin/bash
# One rank of a 2-rank "training" step. Rank 1 runs out of GPU memory; rank 0 waits in its next all-reduce
# until the NCCL watchdog gives up (here: until rank 1 is gone), as a real job does, ten minutes later.
r=$SLURM_PROCID
mark=$SLURM_SUBMIT_DIR/rank1-gone.$SLURM_JOB_ID
echo "rank $r/$SLURM_NTASKS: backend=nccl master=127.0.0.1:29500 local_rank=$SLURM_LOCALID"
if [ "$r" = 0 ]; then
  echo "step 10 | loss 4.1023 | lr 3.00e-04 | 412.3 ms/step"
  echo "step 20 | loss 3.8710 | lr 3.00e-04 | 409.8 ms/step"
fi
if [ "$r" = 1 ]; then
  cat >&2 <<'TB'
[rank1]: Traceback (most recent call last):
[rank1]:   File "/opt/train/train.py", line 212, in <module>
[rank1]:     main()
[rank1]:   File "/opt/train/train.py", line 198, in main
[rank1]:     loss = model(batch).loss
[rank1]:   File "/usr/local/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1532, in _wrapped_call_impl
[rank1]:     return self._call_impl(*args, **kwargs)
[rank1]:   File "/usr/local/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1541, in _call_impl
[rank1]:     return forward_call(*args, **kwargs)
[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.12 GiB memory in use. Of the allocated memory 74.50 GiB is allocated by PyTorch, and 2.11 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)
TB
  : >"$mark"
  exit 1
fi
end=$((SECONDS + 60))
while [ ! -e "$mark" ] && ((SECONDS < end)); do sleep 0.1; done
cat >&2 <<'WD'
[rank0]:[E1203 19:20:01.123456 4242 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=215, OpType=ALLREDUCE, NumelIn=25165824, NumelOut=25165824, Timeout(ms)=600000) ran for 600088 milliseconds before timing out.
[rank0]:[E1203 19:20:01.123789 4242 ProcessGroupNCCL.cpp:1577] [PG 0 Rank 0] Timeout at NCCL work: 215, last enqueued NCCL work: 215, last completed NCCL work: 214.
[rank0]:[E1203 19:20:01.123901 4242 ProcessGroupNCCL.cpp:630] [Rank 0] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.
[rank0]:[E1203 19:20:01.123950 4242 ProcessGroupNCCL.cpp:636] [Rank 0] To avoid data inconsistency, we are taking the entire process down.
terminate called after throwing an instance of 'c10::DistBackendError'
WD
exit 134
EOF
cat >"$T/jobs/train.sbatch" <<EOF
#!/bin/bash
srun bash $T/jobs/train_task.sh
EOF
cat >"$T/jobs/array.sbatch" <<'EOF'
#!/bin/bash
# A torchrun-style job: the worker's traceback is only in the --log-dir tree, the console has the agent's line.
d=torchrun/$SLURM_JOB_ID/attempt_0/0
mkdir -p "$d"
echo "step 10 | loss 3.1021"
echo "step 20 | loss 2.9007"
cat >"$d/stderr.log" <<'TB'
Traceback (most recent call last):
  File "/opt/train/train.py", line 140, in <module>
    torch.cuda.synchronize()
  File "/usr/local/lib/python3.11/site-packages/torch/cuda/__init__.py", line 892, in synchronize
    return torch._C._cuda_synchronize()
RuntimeError: CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
TB
echo "E1203 19:31:02.456000 140211 torch/distributed/elastic/multiprocessing/api.py:833] failed (exitcode: 1) local_rank: 0 (pid: 5121) of binary: /usr/bin/python3" >&2
exit 1
EOF
chmod 0755 "$T/jobs/train_task.sh" "$T/jobs/train.sbatch" "$T/jobs/array.sbatch"

submit() { # sbatch ARGS... -> job id on stdout
  local out
  out=$(sbatch --parsable "$@") || return 1
  printf '%s' "${out%%;*}"
}
job_state() { scontrol -o show job "$1" 2>/dev/null | sed -n 's/.* JobState=\([^ ]*\).*/\1/p' | head -n 1; }
job_done() { # the job record has left PENDING/RUNNING/COMPLETING (the epilogs are over)
  local s
  s=$(job_state "$1")
  case $s in '' | PENDING | RUNNING | COMPLETING | CONFIGURING | SUSPENDED) return 1 ;; *) return 0 ;; esac
}
json_field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); v=d
for k in sys.argv[2].split("."): v=v.get(k) if isinstance(v, dict) else None
print("" if v is None else v)' "$1" "$2"; }

cd "$T/jobs"
JOOM=$(setpriv --reuid=nobody --regid=nogroup --init-groups sbatch --parsable -n 2 -J ffoom -D "$T/jobs" \
  -o "$T/jobs/%x-%j.out" "$T/jobs/train.sbatch") || { echo "FAIL: sbatch (as nobody)"; exit 1; }
JOOM=${JOOM%%;*}
JARR=$(submit -a 5 -n 1 -J ffarr -D "$T/jobs" -o '%x_%A_%a_%N_%5j_%%.out' -e '%x-%j.err' "$T/jobs/array.sbatch") ||
  { echo "FAIL: sbatch -a 5"; exit 1; }
JOK=$(submit -n 1 -J ffok -D "$T/jobs" -o "$T/jobs/%x-%j.out" --wrap 'srun echo "training finished: 100 steps, loss 1.02"') ||
  { echo "FAIL: sbatch --wrap"; exit 1; }
say "   submitted: OOM job $JOOM (as nobody), array job ${JARR}_5, completing job $JOK"

HOST=$(uname -n); HOST=${HOST%%.*}
OOM_OUT=$T/jobs/ffoom-$JOOM.out
ARR_OUT=$T/jobs/ffarr_${JARR}_5_${HOST}_$(printf '%05d' "$JARR")_%.out
OK_OUT=$T/jobs/ffok-$JOK.out

for j in "$JOOM" "$JARR" "$JOK"; do
  wait_for 120 "job $j to end (epilogs included)" job_done "$j" || true
done
# A job stays COMPLETING until its EpilogSlurmctld has finished, so the reports are there by now; a little
# slack all the same.
wait_for 10 "report $OOM_OUT.firstfault.json" test -s "$OOM_OUT.firstfault.json" || true
wait_for 10 "report $ARR_OUT.firstfault.json" test -s "$ARR_OUT.firstfault.json" || true
say "   jobs ended: $JOOM $(job_state "$JOOM"), ${JARR}_5 $(job_state "$JARR"), $JOK $(job_state "$JOK")"

echo "-- OOM job $JOOM (2 tasks, rank 1 CUDA OOM, rank 0 NCCL watchdog)"
check "job $JOOM FAILED in Slurm" test "$(job_state "$JOOM")" = FAILED
check "Slurm wrote $OOM_OUT (%x-%j expanded)" test -s "$OOM_OUT"
check "text report next to the output" test -s "$OOM_OUT.firstfault.txt"
check "json report next to the output" test -s "$OOM_OUT.firstfault.json"
if [ -s "$OOM_OUT.firstfault.json" ]; then
  check "verdict failure" test "$(json_field "$OOM_OUT.firstfault.json" verdict)" = failure
  check "root cause kind cuda_oom" test "$(json_field "$OOM_OUT.firstfault.json" root_cause.kind)" = cuda_oom
  check "initiating rank 1" test "$(json_field "$OOM_OUT.firstfault.json" initiating_rank)" = 1
  check "report files owned by the job's user (nobody)" test "$(stat -c %U "$OOM_OUT.firstfault.json")" = nobody
fi
if [ -s "$OOM_OUT.firstfault.txt" ]; then
  check "text report names rank 1" grep -q 'first failing: rank 1' "$OOM_OUT.firstfault.txt"
  check "text report names cuda_oom" grep -q 'cuda_oom' "$OOM_OUT.firstfault.txt"
  check "text report header names the job" grep -q "Slurm job $JOOM (ffoom)" "$OOM_OUT.firstfault.txt"
fi
check "admin copy in FF_REPORT_DIR" test -s "$T/reports/$JOOM.firstfault.txt"

echo "-- array job ${JARR}_5 (StdOut '%x_%A_%a_%N_%5j_%%.out', StdErr '%x-%j.err', cause in FF_EXTRA_LOGS)"
check "Slurm wrote $(basename "$ARR_OUT") (the expansion this test expects)" test -s "$ARR_OUT"
check "report next to the expanded StdOut" test -s "$ARR_OUT.firstfault.json"
if [ -s "$ARR_OUT.firstfault.json" ]; then
  check "root cause kind illegal_memory_access (from the torchrun log dir)" \
    test "$(json_field "$ARR_OUT.firstfault.json" root_cause.kind)" = illegal_memory_access
  check "inputs include StdErr and the torchrun log" python3 -c '
import json, sys
paths = [i["path"] for i in json.load(open(sys.argv[1]))["inputs"]]
sys.exit(0 if any(p.endswith("ffarr-%s.err" % sys.argv[2]) for p in paths) and any("torchrun/%s/attempt_0/0/stderr.log" % sys.argv[2] in p for p in paths) else 1)' \
    "$ARR_OUT.firstfault.json" "$JARR"
fi

echo "-- completing job $JOK"
check "job $JOK COMPLETED in Slurm" test "$(job_state "$JOK")" = COMPLETED
check "Slurm wrote its output" test -s "$OK_OUT"
check "no report next to its output" test ! -e "$OK_OUT.firstfault.txt" -a ! -e "$OK_OUT.firstfault.json"
check "no report in FF_REPORT_DIR" test ! -e "$T/reports/$JOK.firstfault.txt"
check "its spool directory was removed" test ! -e "$T/spool/ff/$JOK"

echo "-- job cancelled while running"
JCAN=$(submit -n 1 -J ffcancel -D "$T/jobs" -o "$T/jobs/%x-%j.out" \
  --wrap 'for i in $(seq 1 3000); do echo "step $i | loss 2.$((RANDOM % 100))"; sleep 0.2; done') ||
  { echo "FAIL: sbatch (job to cancel)"; exit 1; }
CAN_OUT=$T/jobs/ffcancel-$JCAN.out
wait_for 60 "job $JCAN to print its third step" grep -q 'step 3 ' "$CAN_OUT" || true
scancel "$JCAN"
wait_for 120 "job $JCAN to end" job_done "$JCAN" || true
wait_for 10 "report $CAN_OUT.firstfault.json" test -s "$CAN_OUT.firstfault.json" || true
check "job $JCAN CANCELLED in Slurm" test "$(job_state "$JCAN")" = CANCELLED
check "cancelled job got a report" test -s "$CAN_OUT.firstfault.json"
if [ -s "$CAN_OUT.firstfault.json" ]; then
  check "cancelled job: root cause kind job_cancelled" test "$(json_field "$CAN_OUT.firstfault.json" root_cause.kind)" = job_cancelled
fi

echo "-- history, AdminComment, node, logs"
"$FF" history list --history "$T/history/history.db" --format json >"$T/history.json" 2>"$T/history.err" || true
check "history DB has the OOM job (cuda_oom, rank 1, its output file)" python3 -c '
import json, sys
rows = json.load(open(sys.argv[1]))
sys.exit(0 if any(r["kind"] == "cuda_oom" and r["initiating_rank"] == 1 and "ffoom-%s.out" % sys.argv[2] in r["inputs"] for r in rows) else 1)' \
  "$T/history.json" "$JOOM"
check "history DB: one entry per failed job (3), none for the completed one" python3 -c '
import json, sys
rows = json.load(open(sys.argv[1]))
sys.exit(0 if len(rows) == 3 and not any("ffok-" in r["inputs"] for r in rows) else 1)' "$T/history.json"
jobline=$(scontrol -o show job "$JOOM") || jobline=""
if [[ $jobline == *" AdminComment="* ]]; then
  check "AdminComment set" grep -q ' AdminComment=firstfault: failure kind=cuda_oom rank=1' <<<"$jobline"
else
  # Slurm 22.05 refuses `scontrol update` on an ended job and has no accounting here for sacctmgr.
  check "AdminComment: refusal logged (Slurm 22.05 updates no ended job; no slurmdbd here)" \
    grep -q "job=$JOOM .*AdminComment: no accounting" "$T/log/firstfault-slurm.log"
  echo "       note: scontrol show job $JOOM has no AdminComment: $(grep -o "job=$JOOM .*AdminComment: scontrol refused.*" "$T/log/firstfault-slurm.log" | head -n 1 | sed 's/.*refused //')"
fi
check "node localhost still idle (no epilog drained it)" test "$(sinfo -h -n localhost -o %T)" = idle
check "epilog log has no script error" bash -c "! grep -E 'stopped on an error|refusing|doing nothing' '$T/log/firstfault-slurm.log'"
check "events files merged and removed from the spool" bash -c "[ -z \"\$(ls -A '$T/spool/ff')\" ]"

echo "-- controller epilog by hand: a 3-node job, one node with nothing to scan, one that never answers"
# Same scripts and configuration, a short wait; the job id is unknown to Slurm (scontrol has no record).
sed 's/^FF_WAIT_SECONDS=.*/FF_WAIT_SECONDS=3/' "$T/etc/firstfault-slurm.conf" >"$T/etc/short-wait.conf"
chmod 0644 "$T/etc/short-wait.conf"
mkdir -p "$T/spool/ff/9999"
"$FF" scan "$OOM_OUT" -o "$T/spool/ff/9999/localhost.ffev" --mask-key-file "$T/etc/mask.key" --quiet ||
  bad "firstfault scan $OOM_OUT (exit $?)"
printf 'host=%s\nbatch=1\nview=failed\nwhy=test\n' "$HOST" >"$T/spool/ff/9999/localhost.meta"
echo "no job output or configured log on this node" >"$T/spool/ff/9999/ghost1.none"
cp "$OOM_OUT" "$T/jobs/sim-9999.out"
t_start=$SECONDS
rc=0
env -i FF_SLURM_CONFIG="$T/etc/short-wait.conf" SLURM_JOB_ID=9999 SLURM_JOB_NAME=sim SLURM_JOB_USER=root \
  SLURM_JOB_UID=0 SLURM_JOB_GID=0 SLURM_JOB_NODELIST='localhost,ghost[1-2]' SLURM_JOB_EXIT_CODE2=1:0 \
  SLURM_JOB_DERIVED_EC=256 SLURM_JOB_WORK_DIR="$T/jobs" SLURM_JOB_STDOUT="$T/jobs/sim-%j.out" \
  SLURM_SCRIPT_CONTEXT=epilog_slurmctld "$T/etc/firstfault-epilog-slurmctld.sh" || rc=$?
check "exits 0" test "$rc" = 0
check "bounded: done in $((SECONDS - t_start))s (wait 3s)" test $((SECONDS - t_start)) -le 20
check "missing node logged" grep -q 'job=9999 .*after 3s no marker from 1 of 3 node(s): ghost2' "$T/log/firstfault-slurm.log"
check "report from the node that answered" test -s "$T/jobs/sim-9999.out.firstfault.json"
check "report header names the silent and the empty node" \
  grep -q 'events from 1 of 3 node(s); nothing to scan on: ghost1; no answer from: ghost2' "$T/jobs/sim-9999.out.firstfault.txt"
if [ -s "$T/jobs/sim-9999.out.firstfault.json" ]; then
  check "partial merge still finds cuda_oom on rank 1" test "$(json_field "$T/jobs/sim-9999.out.firstfault.json" root_cause.kind)/$(json_field "$T/jobs/sim-9999.out.firstfault.json" initiating_rank)" = cuda_oom/1
fi
check "its spool directory was removed" test ! -e "$T/spool/ff/9999"

echo "-- controller epilog by hand: FF_DRAIN_ON_ACTION=1 drains the node an Xid 79 names, on this Slurm"
# The job's kernel log says a GPU fell off the bus: the action is restart-excluding-hosts naming this node
# (masked with the site key in the events file; the epilog maps the token back to the node's name).
printf 'FF_DRAIN_ON_ACTION=1\n' | cat "$T/etc/short-wait.conf" - >"$T/etc/drain.conf"
chmod 0644 "$T/etc/drain.conf"
cat >"$T/jobs/xid-9997.out" <<'EOF'
step 10 | loss 3.1021
[Fri Dec  4 10:02:11 2026] NVRM: Xid (PCI:0000:05:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
[rank0]: RuntimeError: CUDA error: unspecified launch failure
EOF
mkdir -p "$T/spool/ff/9997"
"$FF" scan "$T/jobs/xid-9997.out" --host localhost -o "$T/spool/ff/9997/localhost.ffev" --mask-key-file "$T/etc/mask.key" --quiet ||
  bad "firstfault scan xid-9997.out (exit $?)"
printf 'host=%s\nbatch=1\nview=failed\nwhy=test\n' "$HOST" >"$T/spool/ff/9997/localhost.meta"
check "the merged report's action excludes localhost (token mapped back to the node)" \
  test "$("$FF" diagnose --events "$T/spool/ff/9997/localhost.ffev" --mask-key-file "$T/etc/mask.key" --format action \
    --action-hosts localhost,ghost1 --quiet --no-history)" = "restart-excluding-hosts localhost"
rc=0
env -i FF_SLURM_CONFIG="$T/etc/drain.conf" SLURM_JOB_ID=9997 SLURM_JOB_NAME=xid SLURM_JOB_USER=root \
  SLURM_JOB_UID=0 SLURM_JOB_GID=0 SLURM_JOB_NODELIST=localhost SLURM_JOB_EXIT_CODE2=1:0 \
  SLURM_JOB_DERIVED_EC=256 SLURM_JOB_WORK_DIR="$T/jobs" SLURM_JOB_STDOUT="$T/jobs/xid-%j.out" \
  SLURM_SCRIPT_CONTEXT=epilog_slurmctld "$T/etc/firstfault-epilog-slurmctld.sh" || rc=$?
check "exits 0" test "$rc" = 0
if [ -s "$T/jobs/xid-9997.out.firstfault.json" ]; then
  check "report: kind gpu_fell_off_bus, action restart-excluding-hosts" \
    test "$(json_field "$T/jobs/xid-9997.out.firstfault.json" root_cause.kind)/$(json_field "$T/jobs/xid-9997.out.firstfault.json" action.kind)" = gpu_fell_off_bus/restart-excluding-hosts
else
  bad "no report for job 9997"
fi
nodeline=$(scontrol -o show node localhost) || nodeline=""
check "node localhost is drained: $(grep -o 'State=[^ ]*' <<<"$nodeline")" grep -qE 'State=[A-Z+]*DRAIN' <<<"$nodeline"
check "drain reason names the job and the action: $(grep -o 'Reason=.*' <<<"$nodeline" | head -c 110)" \
  grep -q 'Reason=firstfault job 9997: restart-excluding-hosts: failure kind=gpu_fell_off_bus' <<<"$nodeline"
check "drain logged" grep -q 'job=9997 .*drained localhost: firstfault job 9997' "$T/log/firstfault-slurm.log"
scontrol update NodeName=localhost State=RESUME
node_ready() { [ "$(sinfo -h -n localhost -o %T)" = idle ]; }
wait_for 30 "node localhost idle again after RESUME" node_ready || true
check "node localhost resumed (idle)" node_ready

echo "-- controller epilog by hand: FF_DRAIN_ON_ACTION=1 and a CUDA OOM (stop-fix-config): nothing is drained"
mkdir -p "$T/spool/ff/9996"
"$FF" scan "$T/jobs/sim-9999.out" --host localhost -o "$T/spool/ff/9996/localhost.ffev" --mask-key-file "$T/etc/mask.key" --quiet ||
  bad "firstfault scan sim-9999.out (exit $?)"
printf 'host=%s\nbatch=1\nview=failed\nwhy=test\n' "$HOST" >"$T/spool/ff/9996/localhost.meta"
env -i FF_SLURM_CONFIG="$T/etc/drain.conf" SLURM_JOB_ID=9996 SLURM_JOB_NAME=sim SLURM_JOB_USER=root \
  SLURM_JOB_UID=0 SLURM_JOB_GID=0 SLURM_JOB_NODELIST=localhost SLURM_JOB_EXIT_CODE2=1:0 \
  SLURM_JOB_DERIVED_EC=256 SLURM_JOB_WORK_DIR="$T/jobs" SLURM_JOB_STDOUT="$T/jobs/sim-%j.out" \
  SLURM_SCRIPT_CONTEXT=epilog_slurmctld "$T/etc/firstfault-epilog-slurmctld.sh" || true
check "no node drained, logged" grep -q 'job=9996 .*action stop-fix-config: no node drained' "$T/log/firstfault-slurm.log"
check "node localhost still idle" node_ready

echo "-- node epilog by hand: a configuration that others can write is refused"
cp "$T/etc/firstfault-slurm.conf" "$T/etc/writable.conf"
chmod 0666 "$T/etc/writable.conf"
rc=0
env -i FF_SLURM_CONFIG="$T/etc/writable.conf" SLURM_JOB_ID=9998 SLURMD_NODENAME=localhost SLURM_JOB_EXIT_CODE2=1:0 \
  "$T/etc/firstfault-epilog.sh" 2>"$T/refused.err" || rc=$?
check "exits 0" test "$rc" = 0
check "says why (syslog and stderr): $(grep -o 'refusing .*: it must be owned by root' "$T/refused.err" | sed "s|$T|\$T|")" \
  grep -q "refusing $T/etc/writable.conf: it must be owned by root .* mode 666" "$T/refused.err"
check "nothing is written to the spool" test ! -e "$T/spool/ff/9998"

echo "-- epilog log"
sed 's/^/    /' "$T/log/firstfault-slurm.log" 2>/dev/null || true
echo "-- $(basename "$OOM_OUT").firstfault.txt (head)"
{ head -n 8 "$OOM_OUT.firstfault.txt" 2>/dev/null || true; } | sed 's/^/    /'
say "done"
echo "slurm: $passed passed, $failed failed"
[ "$failed" = 0 ]
