# Shared functions of the firstfault Slurm epilogs (sourced; bash). Nothing here exits the caller: every
# function returns a status, the scripts decide. See README.md in this directory.
# Variables set here (FF_*, FFX_*) are read by the scripts that source this file.
# shellcheck disable=SC2034

# ff_init NAME: search path, configuration (validated, then sourced), defaults, log target.
ff_init() {
  FF_CTX=$1
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  export PATH
  umask 022
  FF_LOG_FILE=${FF_LOG_FILE:-}
  local self_dir cfg="" c
  self_dir=$(cd "$(dirname "$0")" 2>/dev/null && pwd) || self_dir=""
  for c in "${FF_SLURM_CONFIG:-}" "${self_dir:+$self_dir/firstfault-slurm.conf}" /etc/firstfault/firstfault-slurm.conf; do
    if [ -n "$c" ] && [ -f "$c" ]; then cfg=$c; break; fi
  done
  if [ -z "$cfg" ]; then
    ff_log "no configuration found (FF_SLURM_CONFIG, $self_dir/firstfault-slurm.conf, /etc/firstfault/firstfault-slurm.conf): doing nothing"
    return 1
  fi
  # The file is sourced by root: refuse one that someone else could have written.
  local owner mode
  owner=$(stat -L -c %u "$cfg" 2>/dev/null) || owner=""
  mode=$(stat -L -c %a "$cfg" 2>/dev/null) || mode=""
  if [ -z "$owner" ] || { [ "$owner" != 0 ] && [ "$owner" != "$(id -u)" ]; } || [ -z "$mode" ] || (( (8#$mode & 8#022) != 0 )); then
    ff_log "refusing $cfg: it must be owned by root (or $(id -un)) and not writable by group or others (owner uid ${owner:-?}, mode ${mode:-?})"
    return 1
  fi
  FF_EXTRA_LOGS=()
  # shellcheck disable=SC1090
  if ! . "$cfg"; then
    ff_log "could not source $cfg"
    return 1
  fi
  FF_CONFIG_FILE=$cfg
  : "${FF_BIN:=/usr/local/bin/firstfault}" "${FF_SPOOL:=}" "${FF_REPORT_DIR:=}" "${FF_HISTORY:=}"
  : "${FF_REPORT_NEXT_TO_OUTPUT:=1}" "${FF_MASK_KEY_FILE:=}" "${FF_KERNEL_LOG:=0}"
  : "${FF_ADMIN_COMMENT:=1}" "${FF_ADMIN_COMMENT_MAX:=200}" "${FF_USE_SACCT:=auto}"
  : "${FF_WAIT_SECONDS:=120}" "${FF_SCAN_TIMEOUT:=60}" "${FF_DIAGNOSE_TIMEOUT:=60}"
  : "${FF_KEEP_EVENTS:=0}" "${FF_SPOOL_MAX_AGE_MIN:=1440}" "${FF_CACHE_DIR:=}" "${FF_DRAIN_ON_ACTION:=0}"
  if [ -n "${FF_SLURM_BIN_DIR:-}" ]; then PATH=$FF_SLURM_BIN_DIR:$PATH; fi
  if [ -n "${FF_SLURM_CONF:-}" ]; then export SLURM_CONF=$FF_SLURM_CONF; fi
  if [ -n "$FF_CACHE_DIR" ]; then
    if [ "$FF_CACHE_DIR" != off ]; then mkdir -p "$FF_CACHE_DIR" 2>/dev/null || true; fi
    export FIRSTFAULT_CACHE_DIR=$FF_CACHE_DIR
  fi
  if [ -z "$FF_SPOOL" ]; then ff_log "FF_SPOOL is not set in $cfg: doing nothing"; return 1; fi
  if [ ! -x "$FF_BIN" ]; then ff_log "FF_BIN=$FF_BIN is not executable: doing nothing"; return 1; fi
  return 0
}

# ff_log MESSAGE...: one line to FF_LOG_FILE, else to syslog and stderr (slurmd and slurmctld discard an
# epilog's output; a person running the script by hand sees it). Never fails.
ff_log() {
  local line
  line="$(date -u '+%Y-%m-%dT%H:%M:%SZ' 2>/dev/null) ${FF_CTX:-firstfault}[job=${SLURM_JOB_ID:-?} node=${SLURMD_NODENAME:-${FF_SELF_HOST:-?}} pid=$$]: $*"
  if [ -n "${FF_LOG_FILE:-}" ] && { printf '%s\n' "$line" >>"$FF_LOG_FILE"; } 2>/dev/null; then
    return 0
  fi
  logger -t firstfault-slurm -- "$line" 2>/dev/null || true
  printf '%s\n' "$line" >&2 2>/dev/null || true
  return 0
}

# ff_valid_jobid ID: digits only (the id becomes a path component).
ff_valid_jobid() { [[ ${1:-} =~ ^[0-9]+$ ]]; }

# ff_scontrol_job ID: FF_JOBLINE = the `scontrol -o show job` line of exactly that job (for the first task of
# an array, scontrol prints every task of the array: the one whose JobId is ID is kept).
ff_scontrol_job() {
  local id=$1 out l
  FF_JOBLINE=""
  out=$(timeout 30 scontrol -o show job "$id" 2>/dev/null) || return 1
  while IFS= read -r l; do
    if [[ $l == "JobId=$id "* ]]; then FF_JOBLINE=$l; return 0; fi
  done <<<"$out"
  return 1
}

# ff_field LINE KEY: the value of KEY= in a one-line scontrol record (values may hold spaces: a value runs to
# the next " Key=").
ff_field() {
  local line=" $1" key=$2 rest val="" head tail
  case $line in *" $key="*) ;; *) return 1 ;; esac
  rest=${line#*" $key="}
  while :; do
    if [[ $rest == *" "* ]]; then
      head=${rest%%" "*}
      tail=${rest#*" "}
      if [[ $tail =~ ^[A-Za-z][A-Za-z0-9_/:]*= ]] || [ -z "$tail" ]; then val+=$head; break; fi
      val+="$head "
      rest=$tail
    else
      val+=$rest
      break
    fi
  done
  printf '%s' "$val"
}

# ff_expand_pattern PATTERN: a Slurm batch filename pattern (sbatch --output/--error), expanded as slurmstepd
# does for the batch step (Slurm 22.05), from FFX_JOBID, FFX_ARRAY_JOB, FFX_ARRAY_TASK, FFX_USER, FFX_NAME,
# FFX_HOST (the batch host's short host name), FFX_WORKDIR:
#   %% -> %   %A array master job id (the job id when not an array)   %a array task id (4294967294 when not
#   an array)   %j %J job id   %n %t 0   %s batch   %N host   %u user   %x job name
#   a number after % zero-pads numeric fields (at most 10); other %c stay as they are; a pattern with a
#   backslash is not expanded (each backslash escapes the next character); a relative path is under WorkDir.
ff_expand_pattern() {
  local pat=$1 out="" i=0 j n c ch w width num s
  n=${#pat}
  if [[ $pat == *\\* ]]; then
    while (( i < n )); do
      c=${pat:i:1}
      if [ "$c" = "\\" ]; then i=$((i + 1)); c=${pat:i:1}; fi
      out+=$c
      i=$((i + 1))
    done
  else
    while (( i < n )); do
      c=${pat:i:1}
      if [ "$c" != % ]; then out+=$c; i=$((i + 1)); continue; fi
      if [ "${pat:i+1:1}" = % ]; then out+=%; i=$((i + 2)); continue; fi
      j=$((i + 1)); w=""
      while [[ ${pat:j:1} == [0-9] ]]; do w+=${pat:j:1}; j=$((j + 1)); done
      ch=${pat:j:1}
      width=$((10#${w:-0}))
      if (( width > 10 )); then width=10; fi
      case $ch in
        a) num=${FFX_ARRAY_TASK:-4294967294} ;;
        A) num=${FFX_ARRAY_JOB:-$FFX_JOBID} ;;
        j | J) num=$FFX_JOBID ;;
        n | t) num=0 ;;
        s) out+="batch"; i=$((j + 1)); continue ;;
        N) out+=${FFX_HOST:-}; i=$((j + 1)); continue ;;
        u) out+=${FFX_USER:-}; i=$((j + 1)); continue ;;
        x) out+=${FFX_NAME:-}; i=$((j + 1)); continue ;;
        *) out+=${pat:i:j-i}; i=$j; continue ;;
      esac
      printf -v s '%0*d' "$width" "$num"
      out+=$s
      i=$((j + 1))
    done
  fi
  if [ -n "$out" ] && [ "${out:0:1}" != / ] && [ -n "${FFX_WORKDIR:-}" ]; then out=${FFX_WORKDIR%/}/$out; fi
  printf '%s' "$out"
}

# ff_sacct_view ID: FF_SACCT_STATE / FF_SACCT_EXIT of the allocation from accounting. Status 1 when accounting
# is off or the job has no final record yet.
ff_sacct_view() {
  local id=$1 out l jid st ec rest
  FF_SACCT_STATE=""; FF_SACCT_EXIT=""; FF_ACCOUNTING=0
  [ "$FF_USE_SACCT" = 0 ] && return 1
  command -v sacct >/dev/null 2>&1 || return 1
  out=$(timeout 30 sacct -j "$id" --format=JobID,State,ExitCode,NodeList -P -n 2>/dev/null) || return 1
  FF_ACCOUNTING=1
  while IFS='|' read -r jid st ec rest; do
    if [ "$jid" = "$id" ] || { [ -n "${FFX_ARRAY_JOB:-}" ] && [ "$jid" = "${FFX_ARRAY_JOB}_${FFX_ARRAY_TASK:-}" ]; }; then
      FF_SACCT_STATE=${st%% *}; FF_SACCT_EXIT=$ec
      break
    fi
  done <<<"$out"
  case $FF_SACCT_STATE in '' | PENDING | RUNNING | COMPLETING | SUSPENDED | RESIZING | REQUEUED) return 1 ;; esac
  return 0
}

# ff_job_view ID: did the job fail? FF_VIEW = failed | ok | unknown, FF_VIEW_WHY = the evidence. Any source
# saying failure wins; ok needs at least one source saying success. Sources: sacct (final state), the
# epilog environment (SLURM_JOB_EXIT_CODE2, SLURM_JOB_DERIVED_EC), scontrol (JobState, Reason, ExitCode).
# Needs FF_JOBLINE (ff_scontrol_job) when scontrol answered.
ff_job_view() {
  local id=$1 fail=() ok=() st reason ec dec
  if ff_sacct_view "$id"; then
    if [ "$FF_SACCT_STATE" = COMPLETED ] && [ "$FF_SACCT_EXIT" = 0:0 ]; then ok+=("sacct=$FF_SACCT_STATE")
    else fail+=("sacct=$FF_SACCT_STATE/$FF_SACCT_EXIT"); fi
  fi
  if [ -n "${SLURM_JOB_EXIT_CODE2:-}" ]; then
    if [ "$SLURM_JOB_EXIT_CODE2" = 0:0 ]; then ok+=("exit=0:0"); else fail+=("exit=$SLURM_JOB_EXIT_CODE2"); fi
  fi
  if [ -n "${SLURM_JOB_DERIVED_EC:-}" ] && [ "$SLURM_JOB_DERIVED_EC" != 0 ]; then fail+=("derived_ec=$SLURM_JOB_DERIVED_EC"); fi
  if [ -n "${FF_JOBLINE:-}" ]; then
    st=$(ff_field "$FF_JOBLINE" JobState) || st=""
    reason=$(ff_field "$FF_JOBLINE" Reason) || reason=""
    ec=$(ff_field "$FF_JOBLINE" ExitCode) || ec=""
    dec=$(ff_field "$FF_JOBLINE" DerivedExitCode) || dec=""
    case $st in
      COMPLETED | COMPLETING | '') ;;
      *) fail+=("state=$st") ;;
    esac
    if [ -n "$reason" ] && [ "$reason" != None ] && [ "$reason" != "(null)" ]; then fail+=("reason=$reason"); fi
    if [ -n "$ec" ]; then
      if [ "$ec" = 0:0 ]; then ok+=("ExitCode=0:0"); else fail+=("ExitCode=$ec"); fi
    fi
    if [ -n "$dec" ] && [ "$dec" != 0:0 ]; then fail+=("DerivedExitCode=$dec"); fi
  fi
  if (( ${#fail[@]} > 0 )); then FF_VIEW=failed; FF_VIEW_WHY="${fail[*]}"
  elif (( ${#ok[@]} > 0 )); then FF_VIEW=ok; FF_VIEW_WHY="${ok[*]}"
  else FF_VIEW=unknown; FF_VIEW_WHY="no state from sacct, environment or scontrol"; fi
  return 0
}

# ff_expand_vars_from_job ID: FFX_* from the environment, then scontrol's record (FF_JOBLINE).
ff_expand_vars_from_job() {
  local v
  FFX_JOBID=$1
  FFX_USER=${SLURM_JOB_USER:-}
  FFX_NAME=${SLURM_JOB_NAME:-}
  FFX_WORKDIR=${SLURM_JOB_WORK_DIR:-}
  FFX_ARRAY_JOB=${SLURM_ARRAY_JOB_ID:-}
  FFX_ARRAY_TASK=${SLURM_ARRAY_TASK_ID:-}
  if [ -n "${FF_JOBLINE:-}" ]; then
    if [ -z "$FFX_NAME" ]; then FFX_NAME=$(ff_field "$FF_JOBLINE" JobName) || FFX_NAME=""; fi
    if [ -z "$FFX_WORKDIR" ]; then FFX_WORKDIR=$(ff_field "$FF_JOBLINE" WorkDir) || FFX_WORKDIR=""; fi
    if [ -z "$FFX_USER" ]; then v=$(ff_field "$FF_JOBLINE" UserId) && FFX_USER=${v%%(*}; fi
    if [ -z "$FFX_ARRAY_JOB" ]; then FFX_ARRAY_JOB=$(ff_field "$FF_JOBLINE" ArrayJobId) || FFX_ARRAY_JOB=""; fi
    if [ -z "$FFX_ARRAY_TASK" ]; then FFX_ARRAY_TASK=$(ff_field "$FF_JOBLINE" ArrayTaskId) || FFX_ARRAY_TASK=""; fi
  fi
  [[ $FFX_ARRAY_JOB =~ ^[0-9]+$ ]] || FFX_ARRAY_JOB=""
  [[ $FFX_ARRAY_TASK =~ ^[0-9]+$ ]] || FFX_ARRAY_TASK=""
  return 0
}

# ff_output_pattern KIND (StdOut|StdErr): the job's unexpanded output pattern: the epilog environment has it
# as submitted (SLURM_JOB_STDOUT/STDERR); scontrol's StdOut/StdErr is only partly expanded (22.05 leaves %N,
# %J, %s, %t, %n, %%, widths, and mangles backslashes), so it is the fallback.
ff_output_pattern() {
  local kind=$1 v=""
  case $kind in
    StdOut) v=${SLURM_JOB_STDOUT:-} ;;
    StdErr) v=${SLURM_JOB_STDERR:-} ;;
  esac
  if [ -z "$v" ] && [ -n "${FF_JOBLINE:-}" ]; then v=$(ff_field "$FF_JOBLINE" "$kind") || v=""; fi
  printf '%s' "$v"
}

# ff_sanitize_comment TEXT: printable ASCII, no quotes, commas or backslashes, collapsed blanks, bounded.
ff_sanitize_comment() {
  local s=$1 max=${FF_ADMIN_COMMENT_MAX:-200}
  s=$(printf '%s' "$s" | LC_ALL=C tr -c '[:print:]' ' ' | LC_ALL=C tr -d "\"'\\\\\`" | LC_ALL=C tr ',' ';' | LC_ALL=C tr -s ' ')
  s=${s# }; s=${s% }
  [[ $max =~ ^[0-9]+$ ]] || max=200
  printf '%s' "${s:0:max}"
}

# ff_write_file DEST SRC [UID GID]: copy SRC to DEST through a temporary file in DEST's directory and a
# rename (a symlink at DEST is replaced, never followed). With UID/GID while root: written as that user (SRC
# is opened before the switch, so it need not be readable by that user).
ff_write_file() {
  local dest=$1 src=$2 uid=${3:-} gid=${4:-}
  # shellcheck disable=SC2016
  local script='d=$(dirname -- "$1"); t=$(mktemp "$d/.firstfault.XXXXXX") || exit 1; if cat >"$t" && chmod 0644 "$t" && mv -f -- "$t" "$1"; then exit 0; fi; rm -f -- "$t"; exit 1'
  if [ -n "$uid" ] && [ "$(id -u)" = 0 ] && [ "$uid" != 0 ]; then
    setpriv --reuid="$uid" --regid="${gid:-$uid}" --init-groups -- bash -c "$script" ff "$dest" <"$src" 2>/dev/null ||
      setpriv --reuid="$uid" --regid="${gid:-$uid}" --clear-groups -- bash -c "$script" ff "$dest" <"$src"
  else
    bash -c "$script" ff "$dest" <"$src"
  fi
}

# ff_mask_args: the mask arguments, the same for scan and diagnose. With a site key, tokens are stable
# across jobs (history can count one host over many jobs) unless FF_MASK_PER_JOB=1 mixes in the job id;
# without one, the key is derived from the job id (hidden from casual readers, but guessable: docs/cluster.md).
ff_mask_args() {
  if [ -n "$FF_MASK_KEY_FILE" ]; then
    FF_MASK_ARGS=(--mask-key-file "$FF_MASK_KEY_FILE")
    if [ "${FF_MASK_PER_JOB:-0}" = 1 ]; then FF_MASK_ARGS+=(--job-id "$SLURM_JOB_ID"); fi
  else
    FF_MASK_ARGS=(--job-id "$SLURM_JOB_ID")
  fi
}
