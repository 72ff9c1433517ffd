#!/bin/bash
# firstfault: Slurm Epilog (slurm.conf `Epilog=`), run by slurmd as root on every node of a job when it ends.
#
# When the job did not complete (state / exit code, see ff_job_view), scans this node's part of the job's
# logs (the job's StdOut/StdErr on the batch host; FF_EXTRA_LOGS such as a torchrun --log-dir, and the kernel
# log with FF_KERNEL_LOG=1, on every node) into the shared spool:
#   $FF_SPOOL/<jobid>/<nodename>.meta   this node's short host name (for %N) and its view of the job
#   $FF_SPOOL/<jobid>/<nodename>.ffev   the events file (firstfault scan), or
#   $FF_SPOOL/<jobid>/<nodename>.none   failed job, nothing to scan here (the reason inside), or
#   $FF_SPOOL/<jobid>/<nodename>.ok     this node saw the job complete: nothing scanned
# firstfault-epilog-slurmctld.sh waits for one of the last three from every node, then merges.
#
# Always exits 0: a failing Epilog drains the node. Problems go to FF_LOG_FILE (else syslog).
set -euo pipefail

FF_LIB="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/firstfault-slurm-lib.sh"
# shellcheck source-path=SCRIPTDIR source=firstfault-slurm-lib.sh
. "$FF_LIB" 2>/dev/null || exit 0

node_main() {
  ff_init epilog || return 0
  local jobid=${SLURM_JOB_ID:-} node dir batch_host="" is_batch=0 p e paths=() seen work rc why
  if ! ff_valid_jobid "$jobid"; then ff_log "no valid SLURM_JOB_ID: nothing to do"; return 0; fi
  FF_SELF_HOST=$(uname -n); FF_SELF_HOST=${FF_SELF_HOST%%.*}
  node=${SLURMD_NODENAME:-$FF_SELF_HOST}
  if ! [[ $node =~ ^[A-Za-z0-9._-]+$ ]]; then ff_log "node name '$node' is not a safe file name"; return 0; fi
  ff_scontrol_job "$jobid" || ff_log "scontrol has no record of the job (deciding from the environment)"
  ff_expand_vars_from_job "$jobid"
  # shellcheck disable=SC2034 # read by ff_expand_pattern
  FFX_HOST=$FF_SELF_HOST
  ff_job_view "$jobid"

  # The spool must be there already: creating it here would hide a missing shared mount behind local files.
  if [ ! -d "$FF_SPOOL" ]; then ff_log "FF_SPOOL=$FF_SPOOL is not a directory (shared spool not mounted?): nothing done"; return 0; fi
  dir=$FF_SPOOL/$jobid
  mkdir -p "$dir"
  if [ -n "${FF_JOBLINE:-}" ]; then batch_host=$(ff_field "$FF_JOBLINE" BatchHost) || batch_host=""; fi
  if [ -z "$batch_host" ]; then
    batch_host=$(scontrol show hostnames "${SLURM_JOB_NODELIST:-${SLURM_NODELIST:-}}" 2>/dev/null | head -n 1) || batch_host=""
  fi
  if [ "$batch_host" = "$node" ]; then is_batch=1; fi
  printf 'host=%s\nbatch=%s\nview=%s\nwhy=%s\n' "$FF_SELF_HOST" "$is_batch" "$FF_VIEW" "$FF_VIEW_WHY" >"$dir/.$node.meta.$$"
  mv -f "$dir/.$node.meta.$$" "$dir/$node.meta"

  if [ "$FF_VIEW" = ok ]; then
    : >"$dir/$node.ok"
    return 0
  fi
  ff_log "job did not complete ($FF_VIEW: $FF_VIEW_WHY): scanning"

  seen=" "
  if [ "$is_batch" = 1 ]; then
    for e in StdOut StdErr; do
      p=$(ff_output_pattern "$e")
      [ -n "$p" ] || continue
      p=$(ff_expand_pattern "$p")
      if [ -f "$p" ] && [[ $seen != *" $p "* ]]; then paths+=("$p"); seen+="$p "; fi
    done
  fi
  for e in "${FF_EXTRA_LOGS[@]}"; do
    [ -n "$e" ] || continue
    p=$(ff_expand_pattern "$e")
    if [ -e "$p" ] && [[ $seen != *" $p "* ]]; then paths+=("$p"); seen+="$p "; fi
  done
  work=$(mktemp -d "${TMPDIR:-/tmp}/firstfault-epilog.XXXXXX")
  # shellcheck disable=SC2064
  trap "rm -rf -- '$work'" EXIT
  if [ "$FF_KERNEL_LOG" = 1 ] && kernel_log "$work/kernel-$node.log"; then paths+=("$work/kernel-$node.log"); fi

  if (( ${#paths[@]} == 0 )); then
    why="no job output or configured log on this node (batch host: $batch_host)"
    printf '%s\n' "$why" >"$dir/$node.none"
    ff_log "$why"
    return 0
  fi
  ff_mask_args
  rc=0
  timeout "$FF_SCAN_TIMEOUT" "$FF_BIN" scan "${paths[@]}" --host "$node" -o "$dir/.$node.ffev.$$" "${FF_MASK_ARGS[@]}" --quiet \
    2>"$work/scan.err" || rc=$?
  # 1 = nothing readable: the events file says which inputs and why, so it still goes to the merge.
  if { [ "$rc" = 0 ] || [ "$rc" = 1 ]; } && [ -s "$dir/.$node.ffev.$$" ]; then
    mv -f "$dir/.$node.ffev.$$" "$dir/$node.ffev"
    ff_log "scanned ${#paths[@]} input(s) -> $dir/$node.ffev (scan exit $rc): ${paths[*]}"
  else
    rm -f "$dir/.$node.ffev.$$"
    why="firstfault scan failed (exit $rc$([ "$rc" = 124 ] && echo ", timed out after ${FF_SCAN_TIMEOUT}s")): $(head -c 500 "$work/scan.err" | tr '\n' ' ')"
    printf '%s\n' "$why" >"$dir/$node.none"
    ff_log "$why"
  fi
  return 0
}

# kernel_log FILE: this node's kernel messages from the job's start to a minute after its end.
kernel_log() {
  local out=$1 start="" end="" since until
  if [ -n "${FF_JOBLINE:-}" ]; then
    start=$(ff_field "$FF_JOBLINE" StartTime) || start=""
    end=$(ff_field "$FF_JOBLINE" EndTime) || end=""
  fi
  since=$(date -d "${start/T/ }" +%s 2>/dev/null) || since=$(( $(date +%s) - 86400 ))
  until=$(date -d "${end/T/ }" +%s 2>/dev/null) || until=$(date +%s)
  until=$((until + 60))
  if command -v journalctl >/dev/null 2>&1 &&
    timeout 20 journalctl -k -q --no-pager -o short-iso --since "@$since" --until "@$until" >"$out" 2>/dev/null && [ -s "$out" ]; then
    return 0
  fi
  timeout 20 dmesg -T >"$out" 2>/dev/null && [ -s "$out" ]
}

set +e
(node_main)
rc=$?
if [ "$rc" != 0 ]; then ff_log "epilog stopped on an error (status $rc); the node is left in service"; fi
exit 0
