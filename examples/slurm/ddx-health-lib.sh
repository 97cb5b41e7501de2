# shellcheck shell=bash disable=SC2034  # sets DDX_HEALTH_RC and the settings for the script sourcing it
# Sourced by ddx-health-check.sh, prolog.sh and epilog.sh: reads the configuration and runs
# `ddx health` once, so that the three agree on what a run is and on failing open.
#
# Configuration: the file $DDX_HEALTH_CONFIG names, else /etc/ddx/health.conf (the example is
# ddx-health.conf beside this file). slurmd runs these scripts as root with almost no
# environment: a missing default file means defaults (ddx on PATH, no --path, no files written).
#
# ddx_health_run LEVEL_SETTING ARGS...: runs `ddx health --level <the value of the setting named
# LEVEL_SETTING> ARGS... --node NODE` plus the configured arguments and files, with a timeout; its output goes to stdout and its verdict line to syslog (tag
# ddx-health). Sets DDX_HEALTH_RC to ddx's Nagios state: 0 OK, 1 WARN, 2 CRITICAL, 3 UNKNOWN. Anything
# else (ddx missing, a library missing, a crash, the timeout) is 3: ddx could not check, and a
# fault of ddx itself never takes a node out of service.

ddx_health_load_config() {
  DDX=ddx
  DDX_HEALTH_LEVEL=1
  DDX_PROLOG_LEVEL=1
  DDX_EPILOG_LEVEL=1
  DDX_HEALTH_ARGS=
  DDX_HEALTH_PROMETHEUS=
  DDX_HEALTH_JSON=
  DDX_HEALTH_TIMEOUT=50
  DDX_HEALTH_LOCK=/tmp/ddx-health-%n.lock
  local config="${DDX_HEALTH_CONFIG:-/etc/ddx/health.conf}"
  if [[ -r $config ]]; then
    # shellcheck disable=SC1090  # the operator's configuration
    source "$config"
  elif [[ -n ${DDX_HEALTH_CONFIG:-} ]]; then
    ddx_health_say "ddx-health: UNKNOWN: cannot read DDX_HEALTH_CONFIG=$config; node left as it is"
    return 1
  fi
  return 0
}

ddx_health_say() {
  echo "$1"
  command -v logger >/dev/null 2>&1 && logger -t ddx-health -- "$1" 2>/dev/null
  return 0
}

ddx_health_run() {
  DDX_HEALTH_RC=3
  local level_setting=$1
  shift
  ddx_health_load_config || return 0
  local node="${SLURMD_NODENAME:-$(hostname -s)}"
  # A bad level is ddx's to refuse: one line and exit 3, which changes nothing.
  local args=(health --level "${!level_setting}" "$@" --node "$node")
  [[ -n $DDX_HEALTH_PROMETHEUS ]] && args+=(--prometheus "$DDX_HEALTH_PROMETHEUS")
  # %n the node, %l the level: a level-1 Prolog must not overwrite the health check's level-2 figures.
  local json="${DDX_HEALTH_JSON//%n/$node}"
  [[ -n $json ]] && args+=(--json "${json//%l/${!level_setting}}")
  # One run at a time on a node: slurmd starts a health check every interval whether the last one
  # ended or not, and a Prolog may start during one. A caller that must not wait (the health
  # check) sets ddx_health_lock_wait=0 and is skipped as UNKNOWN; the others wait their turn.
  local lock="${DDX_HEALTH_LOCK//%n/$node}" lock_fd=
  if [[ -n $lock ]] && command -v flock >/dev/null 2>&1; then
    if ! exec {lock_fd}>>"$lock"; then
      ddx_health_say "ddx-health: UNKNOWN on $node: cannot open the lock file $lock (DDX_HEALTH_LOCK); node left as it is"
      return 0
    fi
    local wait="${ddx_health_lock_wait:-$DDX_HEALTH_TIMEOUT}"
    if ! flock -w "$wait" "$lock_fd"; then
      exec {lock_fd}>&-
      ddx_health_say "ddx-health: UNKNOWN on $node: another ddx health run still holds $lock after ${wait} s; this one skipped, node left as it is"
      return 0
    fi
  fi
  local output rc
  # DDX_HEALTH_ARGS is words ("--path /scratch --path /ckpt"): split on purpose. ddx does not
  # inherit the lock: a process it leaves behind must not hold every later run off.
  # shellcheck disable=SC2086
  if [[ -n $lock_fd ]]; then
    output=$(timeout --kill-after=5 "$DDX_HEALTH_TIMEOUT" "$DDX" "${args[@]}" $DDX_HEALTH_ARGS 2>&1 {lock_fd}>&-)
  else
    output=$(timeout --kill-after=5 "$DDX_HEALTH_TIMEOUT" "$DDX" "${args[@]}" $DDX_HEALTH_ARGS 2>&1)
  fi
  rc=$?
  [[ -n $lock_fd ]] && exec {lock_fd}>&-
  [[ -n $output ]] && printf '%s\n' "$output"
  case $rc in
    0 | 1 | 2 | 3)
      DDX_HEALTH_RC=$rc
      ddx_health_say "${output##*$'\n'}"
      ;;
    124 | 137) ddx_health_say "ddx-health: UNKNOWN on $node: ddx health did not finish within ${DDX_HEALTH_TIMEOUT} s; node left as it is" ;;
    *) ddx_health_say "ddx-health: UNKNOWN on $node: $DDX could not run (exit $rc: ${output##*$'\n'}); node left as it is" ;;
  esac
  return 0
}
