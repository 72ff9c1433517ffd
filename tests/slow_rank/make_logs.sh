#!/usr/bin/env bash
# Records the logs of this folder from real runs of job.py (4 ranks, gloo, CPU) under torchrun, through
# bench/faults/launch.py (torchrun with the fix Debian 12's torch 1.13 needs). Not run by the tests, which
# read the recorded logs; rerun it to record them again (about 30 s):
#   healthy/console.log   rank 2 is 5x slower a step; the job ends well (the others wait in the all_gather)
#   timeout/console.log   the same with a 4 s collective timeout: the all_gather times out on the fast ranks
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
LAUNCH=$HERE/../../bench/faults/launch.py
run() {  # run NAME JOB-ARGS...
  local name=$1; shift
  local port
  port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  mkdir -p "$HERE/$name"
  (cd "$(mktemp -d)" && OMP_NUM_THREADS=1 /usr/bin/python3 "$LAUNCH" run --nproc_per_node 4 --tee 3 --master_port "$port" \
     "$HERE/job.py" "$@" >"$HERE/$name/console.log" 2>&1)
  echo "$name: exit $?"
}
run healthy --batches 40 --slow-rank 2 --slow-s 0.2
run timeout --batches 40 --slow-rank 2 --slow-s 0.4 --timeout 4
