#!/bin/bash
# firstfault: Slurm EpilogSlurmctld (slurm.conf `EpilogSlurmctld=`), run by slurmctld as SlurmUser on the
# controller when a job ends.
#
# Waits (bounded by FF_WAIT_SECONDS, polling) for one marker per node of the job from firstfault-epilog.sh in
# $FF_SPOOL/<jobid>/ (<node>.ffev, .none or .ok). When the job did not complete -- by the controller's view
# (sacct, the exit code in the environment, scontrol) or by any node's -- merges the events files with
# `firstfault diagnose --events`, and writes the report:
#   <job StdOut>.firstfault.txt and .json       next to the job's output (FF_REPORT_NEXT_TO_OUTPUT=1), as the
#                                               job's user when running as root
#   $FF_REPORT_DIR/<jobid>.firstfault.txt/.json  a copy for the admins (when FF_REPORT_DIR is set)
# stores the diagnosis in FF_HISTORY, sets the one-line verdict as the job's AdminComment
# (FF_ADMIN_COMMENT=1), and with FF_DRAIN_ON_ACTION=1 drains the nodes the report's action says to leave out
# (restart-excluding-hosts; docs/actions.md). A job every node saw complete gets nothing.
#
# Always exits 0 (a failing EpilogSlurmctld is only logged by Slurm, but its time is the job's COMPLETING
# time). Problems go to FF_LOG_FILE (else syslog).
set -euo pipefail

FF_LIB="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/firstfault-slurm-lib.sh"
# shellcheck source-path=SCRIPTDIR source=firstfault-slurm-lib.sh
. "$FF_LIB" 2>/dev/null || exit 0

ctld_main() {
  ff_init epilog_slurmctld || return 0
  local jobid=${SLURM_JOB_ID:-} dir nodes=() n ffev=() none=() ok=() missing=() deadline failed=0 work
  if ! ff_valid_jobid "$jobid"; then ff_log "no valid SLURM_JOB_ID: nothing to do"; return 0; fi
  # Without the spool every job would wait FF_WAIT_SECONDS (in COMPLETING) for markers that cannot come.
  if [ ! -d "$FF_SPOOL" ]; then ff_log "FF_SPOOL=$FF_SPOOL is not a directory (shared spool not mounted?): nothing done"; return 0; fi
  dir=$FF_SPOOL/$jobid
  prune_spool "$jobid"

  ff_scontrol_job "$jobid" || true
  ff_expand_vars_from_job "$jobid"
  ff_job_view "$jobid"
  local ctld_view=$FF_VIEW ctld_why=$FF_VIEW_WHY

  local nodelist=${SLURM_JOB_NODELIST:-}
  if [ -z "$nodelist" ] && [ -n "${FF_JOBLINE:-}" ]; then nodelist=$(ff_field "$FF_JOBLINE" NodeList) || nodelist=""; fi
  if [ -n "$nodelist" ] && [ "$nodelist" != "(null)" ]; then
    mapfile -t nodes < <(scontrol show hostnames "$nodelist" 2>/dev/null || true)
  fi
  if (( ${#nodes[@]} == 0 )); then
    # Never ran on a node (cancelled while pending, launch failure before any node): no logs to read.
    ff_log "no nodes for the job (NodeList '${nodelist}'; view $ctld_view: $ctld_why): nothing to diagnose"
    return 0
  fi

  # One marker per node, within the deadline.
  deadline=$((SECONDS + FF_WAIT_SECONDS))
  while :; do
    ffev=(); none=(); ok=(); missing=()
    for n in "${nodes[@]}"; do
      if [ -s "$dir/$n.ffev" ]; then ffev+=("$n")
      elif [ -e "$dir/$n.none" ]; then none+=("$n")
      elif [ -e "$dir/$n.ok" ]; then ok+=("$n")
      else missing+=("$n"); fi
    done
    if (( ${#missing[@]} == 0 )) || (( SECONDS >= deadline )); then break; fi
    sleep 0.5
  done
  if (( ${#missing[@]} > 0 )); then
    ff_log "after ${FF_WAIT_SECONDS}s no marker from ${#missing[@]} of ${#nodes[@]} node(s): ${missing[*]:0:20}"
  fi

  if [ "$ctld_view" = failed ] || (( ${#ffev[@]} + ${#none[@]} > 0 )); then failed=1; fi
  if [ "$failed" = 0 ]; then
    if [ "$ctld_view" = unknown ] && (( ${#ok[@]} == 0 )); then
      ff_log "job state unknown and no node reported: nothing done"
    fi
    cleanup_spool "$dir"
    return 0
  fi
  local why="controller: $ctld_view ($ctld_why)"
  for n in "${ffev[@]}" "${none[@]}"; do why+="; $n: $(meta_get "$dir/$n.meta" view) ($(meta_get "$dir/$n.meta" why))"; done
  if (( ${#ffev[@]} == 0 )); then
    ff_log "job did not complete [$why] but no node had logs to scan: $(for n in "${none[@]}"; do printf '%s: %s; ' "$n" "$(head -c 300 "$dir/$n.none" 2>/dev/null)"; done)"
    cleanup_spool "$dir"
    return 0
  fi

  work=$(mktemp -d "${TMPDIR:-/tmp}/firstfault-ctld.XXXXXX")
  # shellcheck disable=SC2064
  trap "rm -rf -- '$work'" EXIT
  local files=() rc=0 hist=(--no-history)
  for n in "${ffev[@]}"; do files+=("$dir/$n.ffev"); done
  ff_mask_args
  if [ -n "$FF_HISTORY" ]; then
    mkdir -p "$(dirname "$FF_HISTORY")" 2>/dev/null || true
    hist=(--history "$FF_HISTORY")
  fi
  # The history write is serialised (many jobs can end at once; SQLite on one file).
  if [ -n "$FF_HISTORY" ]; then
    flock -w 30 "$FF_HISTORY.lock" timeout "$FF_DIAGNOSE_TIMEOUT" "$FF_BIN" diagnose --events "${files[@]}" \
      "${FF_MASK_ARGS[@]}" --format json --quiet "${hist[@]}" >"$work/report.json" 2>"$work/err" || rc=$?
  else
    timeout "$FF_DIAGNOSE_TIMEOUT" "$FF_BIN" diagnose --events "${files[@]}" \
      "${FF_MASK_ARGS[@]}" --format json --quiet "${hist[@]}" >"$work/report.json" 2>"$work/err" || rc=$?
  fi
  case $rc in
    0 | 1 | 3) ;;
    *)
      ff_log "firstfault diagnose failed (exit $rc): $(head -c 500 "$work/err" | tr '\n' ' ')"
      cleanup_spool "$dir"
      return 0
      ;;
  esac
  local brief="" text_rc=0
  brief=$(timeout "$FF_DIAGNOSE_TIMEOUT" "$FF_BIN" diagnose --events "${files[@]}" "${FF_MASK_ARGS[@]}" \
    --format brief --quiet --no-history 2>/dev/null | head -n 1) || true
  {
    printf 'firstfault report for Slurm job %s' "$jobid"
    if [ -n "$FFX_NAME" ]; then printf ' (%s)' "$FFX_NAME"; fi
    printf ', nodes %s\n' "$nodelist"
    printf 'job: %s\n' "$why"
    printf 'events from %d of %d node(s)' "${#ffev[@]}" "${#nodes[@]}"
    if (( ${#none[@]} > 0 )); then printf '; nothing to scan on: %s' "${none[*]:0:20}"; fi
    if (( ${#missing[@]} > 0 )); then printf '; no answer from: %s' "${missing[*]:0:20}"; fi
    printf '\n\n'
    timeout "$FF_DIAGNOSE_TIMEOUT" "$FF_BIN" diagnose --events "${files[@]}" "${FF_MASK_ARGS[@]}" \
      --format text --color never --quiet --no-history 2>/dev/null || text_rc=$?
  } >"$work/report.txt"
  case $text_rc in 0 | 1 | 3) ;; *) ff_log "text report: diagnose exit $text_rc" ;; esac
  ff_log "diagnosis (exit $rc, ${#ffev[@]}/${#nodes[@]} nodes): ${brief:-?}"

  write_reports "$jobid" "$dir" "$work"
  if [ "$FF_ADMIN_COMMENT" = 1 ] && [ -n "$brief" ]; then set_admin_comment "$jobid" "firstfault: $brief"; fi
  if [ "$FF_DRAIN_ON_ACTION" = 1 ]; then drain_for_action "$jobid" "$brief" "${nodes[@]}" -- "${files[@]}"; fi
  cleanup_spool "$dir"
  return 0
}

# meta_get FILE KEY: a value from a node's .meta file (key=value lines; read, never sourced).
meta_get() {
  local f=$1 k=$2 line
  [ -f "$f" ] || return 0
  while IFS= read -r line; do
    if [[ $line == "$k="* ]]; then printf '%s' "${line#*=}" | LC_ALL=C tr -cd '[:print:]' | head -c 300; return 0; fi
  done <"$f"
}

write_reports() {
  local jobid=$1 dir=$2 work=$3 host pat out ext
  if [ -n "$FF_REPORT_DIR" ]; then
    mkdir -p "$FF_REPORT_DIR" 2>/dev/null || true
    for ext in txt json; do
      if ff_write_file "$FF_REPORT_DIR/$jobid.firstfault.$ext" "$work/report.$ext"; then :; else
        ff_log "could not write $FF_REPORT_DIR/$jobid.firstfault.$ext"
      fi
    done
  fi
  [ "$FF_REPORT_NEXT_TO_OUTPUT" = 1 ] || return 0
  # %N is the batch host's short host name: the batch host's epilog recorded it.
  local batch_node="" n
  if [ -n "${FF_JOBLINE:-}" ]; then batch_node=$(ff_field "$FF_JOBLINE" BatchHost) || batch_node=""; fi
  for n in "$batch_node" "${nodes[@]:0:1}"; do
    [ -n "$n" ] || continue
    host=$(meta_get "$dir/$n.meta" host)
    if [ -n "$host" ]; then break; fi
  done
  if ! [[ ${host:-} =~ ^[A-Za-z0-9._-]+$ ]]; then host=${batch_node:-${nodes[0]}}; fi
  # shellcheck disable=SC2034 # read by ff_expand_pattern
  FFX_HOST=$host
  pat=$(ff_output_pattern StdOut)
  if [ -z "$pat" ]; then ff_log "no StdOut path for the job: report only in ${FF_REPORT_DIR:-(no FF_REPORT_DIR)}"; return 0; fi
  out=$(ff_expand_pattern "$pat")
  if [ "$out" = /dev/null ] || [ ! -d "$(dirname "$out")" ]; then
    ff_log "job output $out: no directory to write the report next to it (report in ${FF_REPORT_DIR:-nowhere else})"
    return 0
  fi
  for ext in txt json; do
    if ff_write_file "$out.firstfault.$ext" "$work/report.$ext" "${SLURM_JOB_UID:-}" "${SLURM_JOB_GID:-}"; then
      ff_log "report: $out.firstfault.$ext"
    else
      ff_log "could not write $out.firstfault.$ext (as uid ${SLURM_JOB_UID:-?} from uid $(id -u)); report in ${FF_REPORT_DIR:-nowhere else}"
    fi
  done
}

# set_admin_comment JOBID TEXT: scontrol first (works while the job record can still be updated), then
# accounting (sacctmgr; the only way once the job has ended in Slurm 22.05).
set_admin_comment() {
  local msg out id=$1 _
  msg=$(ff_sanitize_comment "$2")
  [ -n "$msg" ] || return 0
  # An array task by <array job>_<task>: the last task of an array has the array's own job id, and
  # "JobId=<that id>" would update every task of the array.
  if [ -n "$FFX_ARRAY_JOB" ] && [ -n "$FFX_ARRAY_TASK" ]; then id=${FFX_ARRAY_JOB}_${FFX_ARRAY_TASK}; fi
  if out=$(timeout 30 scontrol update "JobId=$id" "AdminComment=$msg" 2>&1); then
    ff_log "AdminComment set: $msg"
    return 0
  fi
  ff_log "AdminComment: scontrol refused ($(printf '%s' "$out" | tr '\n' ' ' | head -c 200))"
  if [ "${FF_ACCOUNTING:-0}" != 1 ] || ! command -v sacctmgr >/dev/null 2>&1; then
    ff_log "AdminComment: no accounting (slurmdbd) to store it in; not set"
    return 0
  fi
  # slurmdbd may not have the job's end record yet: a few bounded tries.
  for _ in 1 2 3; do
    if out=$(timeout 30 sacctmgr -i modify job where "jobid=$id" set "AdminComment=$msg" 2>&1) &&
      [[ $out != *"Nothing modified"* ]]; then
      ff_log "AdminComment stored in accounting: $msg"
      return 0
    fi
    sleep 2
  done
  ff_log "AdminComment: sacctmgr failed ($(printf '%s' "$out" | tr '\n' ' ' | head -c 200))"
  return 0
}

# drain_for_action JOBID BRIEF NODE... -- EVENTS...: when the merged diagnosis's action is
# restart-excluding-hosts, drains each host it names that is a node of the job (`diagnose --format action
# --action-hosts` maps masked tokens back to node names and drops any other name), with the verdict as the
# reason. Other actions drain nothing.
drain_for_action() {
  local jobid=$1 brief=$2 nodes=() line kind hosts h reason out
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do nodes+=("$1"); shift; done
  shift
  line=$(timeout "$FF_DIAGNOSE_TIMEOUT" "$FF_BIN" diagnose --events "$@" "${FF_MASK_ARGS[@]}" --format action \
    --action-hosts "$(IFS=,; printf '%s' "${nodes[*]}")" --quiet --no-history 2>/dev/null | head -n 1) || true
  kind=${line%% *}
  if [ "$kind" != restart-excluding-hosts ]; then
    ff_log "action ${kind:-unknown}: no node drained"
    return 0
  fi
  hosts=${line#"$kind"}
  hosts=${hosts# }
  if [ -z "$hosts" ]; then ff_log "action $kind names no node of the job: no node drained"; return 0; fi
  reason=$(ff_sanitize_comment "firstfault job $jobid: $kind: ${brief:-see the report}")
  for h in ${hosts//,/ }; do
    if ! [[ $h =~ ^[A-Za-z0-9._-]+$ ]]; then ff_log "not a node name: '$h'"; continue; fi
    if out=$(timeout 30 scontrol update "NodeName=$h" State=DRAIN "Reason=$reason" 2>&1); then
      ff_log "drained $h: $reason"
    else
      ff_log "could not drain $h: $(printf '%s' "$out" | tr '\n' ' ' | head -c 200)"
    fi
  done
  return 0
}

cleanup_spool() {
  local dir=$1
  [ "$FF_KEEP_EVENTS" = 1 ] && return 0
  rm -rf -- "$dir" 2>/dev/null || ff_log "could not remove $dir"
  return 0
}

# prune_spool CURRENT: job directories left behind (a node that answered after the deadline, a controller
# restart) older than FF_SPOOL_MAX_AGE_MIN minutes. Only all-digit names are touched.
prune_spool() {
  local d
  [[ $FF_SPOOL_MAX_AGE_MIN =~ ^[0-9]+$ ]] && (( FF_SPOOL_MAX_AGE_MIN > 0 )) || return 0
  [ -d "$FF_SPOOL" ] || return 0
  while IFS= read -r -d '' d; do
    [[ $(basename "$d") =~ ^[0-9]+$ ]] && [ "$(basename "$d")" != "$1" ] && rm -rf -- "$d"
  done < <(find "$FF_SPOOL" -mindepth 1 -maxdepth 1 -type d -mmin "+$FF_SPOOL_MAX_AGE_MIN" -print0 2>/dev/null)
  return 0
}

set +e
(ctld_main)
rc=$?
if [ "$rc" != 0 ]; then ff_log "EpilogSlurmctld stopped on an error (status $rc)"; fi
exit 0
