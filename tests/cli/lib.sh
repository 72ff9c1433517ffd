# Helpers shared by the CLI test scripts (run_cli_tests.sh, run_watch_tests.sh, run_slow_rank_tests.sh):
#   . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# check counts failures in $fails; port, metric and wait_metric_ge are the readiness signals of a `watch`
# with --metrics on 127.0.0.1:$MPORT (polled, never a fixed wait).
fails=0

# check NAME COMMAND...: runs the command, prints "ok   NAME" or "FAIL NAME" (and counts it in $fails)
check() {
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}

# A free TCP port on loopback.
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# metric NAME: the value of a Prometheus metric of the watch serving 127.0.0.1:$MPORT (empty when none).
metric() { curl -s "http://127.0.0.1:$MPORT/metrics" 2>/dev/null | awk -v m="$1" '$1 == m {print $2}'; }

# wait_metric_ge NAME N: polls until the metric's integer part is at least N (false after 60 s).
wait_metric_ge() {
  local name=$1 want=$2 t=0 v
  while :; do
    v=$(metric "$name")
    [ -n "$v" ] && [ "${v%.*}" -ge "$want" ] && return 0
    sleep 0.05; t=$((t + 1)); [ $t -gt 1200 ] && return 1
  done
}

# wait_for FILE PATTERN: polls until the file holds the pattern (grep; false after 60 s).
wait_for() {
  local file=$1 pattern=$2 t=0
  while ! grep -q -- "$pattern" "$file" 2>/dev/null; do sleep 0.1; t=$((t + 1)); [ $t -gt 600 ] && return 1; done
  return 0
}
