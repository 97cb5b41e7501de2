#!/usr/bin/env bash
# examples/slurm/'s scripts around a stand-in ddx (a script that records its arguments and answers
# with a chosen exit code): the level each script asks for, how each maps ddx's Nagios state to its
# own exit code (a Prolog fails only on CRITICAL), failing open (ddx missing or too slow is 3), and
# one run at a time per node (the health check skips its turn while another run holds the lock, a
# Prolog waits for it, and a process ddx leaves behind does not hold the lock). The real SLURM runs
# these scripts in tests/dist/health_slurm_test.cpp.
#   bash health_slurm_scripts_test.sh
set -uo pipefail
examples="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../examples/slurm" && pwd)"
work=$(mktemp -d /tmp/ddx-health-scripts.XXXXXX)
cleanup() {
  pkill -f "$work/" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

cat > "$work/ddx" <<'FAKE'
#!/bin/bash
echo "$*" >> "$FAKE_DIR/calls"
if [[ -n ${FAKE_LEAVE:-} ]]; then sleep 30 >/dev/null 2>&1 & fi   # a child left behind with the files ddx inherited
sleep "${FAKE_SLEEP:-0}"
echo "ddx health: state $FAKE_RC on fake"
exit "${FAKE_RC:-0}"
FAKE
chmod +x "$work/ddx"
export FAKE_DIR="$work" SLURMD_NODENAME=node-b DDX_HEALTH_CONFIG="$work/health.conf"

configure() {  # extra configuration lines
  {
    echo "DDX=$work/ddx"
    echo "DDX_HEALTH_LOCK=$work/lock-%n"
    echo "DDX_HEALTH_TIMEOUT=4"
    printf '%s\n' "$@"
  } > "$work/health.conf"
  : > "$work/calls"
}

# run SCRIPT: its exit code in $rc and its output in $out
run() {
  out=$(bash "$examples/$1" 2>&1)
  rc=$?
}

expect_rc() { [[ $rc == "$1" ]] || fail "$2: exit $rc, want $1; output: $out"; }
expect_calls() { [[ $(wc -l < "$work/calls") == "$1" ]] || fail "$2: ddx ran $(wc -l < "$work/calls") times, want $1"; }

# The health check: --level from DDX_HEALTH_LEVEL, drain and resume, the node; ddx's state is its exit.
configure
for state in 0 1 2 3; do
  FAKE_RC=$state run ddx-health-check.sh
  expect_rc "$state" "health check, ddx state $state"
done
grep -qx -- "health --level 1 --slurm-drain --slurm-resume --node node-b" "$work/calls" ||
  fail "health check arguments: $(head -n 1 "$work/calls")"
configure "DDX_HEALTH_LEVEL=2" "DDX_HEALTH_ARGS='--path /scratch'" "DDX_HEALTH_JSON=$work/%n-level%l.json"
FAKE_RC=0 run ddx-health-check.sh
grep -qx -- "health --level 2 --slurm-drain --slurm-resume --node node-b --json $work/node-b-level2.json --path /scratch" \
  "$work/calls" || fail "level 2 arguments: $(cat "$work/calls")"

# Prolog and Epilog: drain on CRITICAL and fail (SLURM requeues the job); everything else lets it run.
configure
for script in prolog.sh epilog.sh; do
  for state in 0 1 2 3; do
    FAKE_RC=$state run "$script"
    expect_rc "$([[ $state == 2 ]] && echo 1 || echo 0)" "$script, ddx state $state"
  done
done
grep -qx -- "health --level 1 --slurm-drain --node node-b" "$work/calls" || fail "prolog arguments: $(head -n 1 "$work/calls")"

# Failing open: ddx missing, or past the timeout, is UNKNOWN and the Prolog lets the job run.
configure "DDX=$work/no-such-ddx"
run ddx-health-check.sh
expect_rc 3 "missing ddx"
[[ $out == *"could not run (exit 127"* ]] || fail "missing ddx: $out"
run prolog.sh
expect_rc 0 "prolog with a missing ddx"
configure
FAKE_RC=2 FAKE_SLEEP=10 run ddx-health-check.sh
expect_rc 3 "ddx past the timeout"
[[ $out == *"did not finish within 4 s"* ]] || fail "timeout: $out"

# One run at a time: the health check skips its turn, without running ddx, while the lock is held.
configure
flock "$work/lock-node-b" sleep 3 &
holder=$!
sleep 0.5
FAKE_RC=0 run ddx-health-check.sh
expect_rc 3 "health check while another run holds the lock"
[[ $out == *"another ddx health run still holds $work/lock-node-b after 0 s; this one skipped"* ]] || fail "skip: $out"
expect_calls 0 "health check while locked"
# A Prolog waits for it (up to DDX_HEALTH_TIMEOUT) and then runs.
FAKE_RC=2 run prolog.sh
expect_rc 1 "prolog after waiting for the lock"
expect_calls 1 "prolog after waiting"
wait "$holder"
# Another node's lock is another file.
flock "$work/lock-node-b" sleep 3 &
holder=$!
sleep 0.5
SLURMD_NODENAME=node-a FAKE_RC=0 run ddx-health-check.sh
expect_rc 0 "node a while node b's lock is held"
wait "$holder"

# A process ddx leaves behind does not keep the lock: the next check runs.
configure
FAKE_LEAVE=1 FAKE_RC=0 run ddx-health-check.sh
expect_rc 0 "a run that leaves a child behind"
FAKE_RC=1 run ddx-health-check.sh
expect_rc 1 "the run after one that left a child behind"
expect_calls 2 "both runs"

if [[ $failures -gt 0 ]]; then
  echo "health_slurm_scripts_test: $failures failure(s)"
  exit 1
fi
echo "health_slurm_scripts_test: PASS"
