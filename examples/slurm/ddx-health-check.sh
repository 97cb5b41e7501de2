#!/bin/bash
# SLURM HealthCheckProgram: `ddx health --level $DDX_HEALTH_LEVEL` (1 by default: passive, 10 s or
# less; 2 adds the known-answer GEMM and the active checks, 60 s or less) on this node every
# HealthCheckInterval. On CRITICAL ddx drains the node with a reason "ddx: ..." that `sinfo -R`
# shows; once the fault is gone it resumes the node, but only a drain of its own: a node an
# operator drained stays drained. UNKNOWN (ddx could not check, or could not even start) changes
# nothing. Writes the Prometheus textfile when configured.
#
#   slurm.conf:  HealthCheckProgram=/opt/ddx/examples/slurm/ddx-health-check.sh
#                HealthCheckInterval=300
#                HealthCheckNodeState=ANY,CYCLE
#
# slurmd starts a check every interval whether the last one has ended or not: keep the interval
# well above the level's run time (and DDX_HEALTH_TIMEOUT), or checks pile up on a slow node.
#
# Configuration: ddx-health-lib.sh (DDX_HEALTH_CONFIG, else /etc/ddx/health.conf). slurmd
# ignores this script's exit code; it is ddx's Nagios state (0 OK, 1 WARN, 2 CRITICAL,
# 3 UNKNOWN), for running it by hand or from another monitor.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=ddx-health-lib.sh
source "$here/ddx-health-lib.sh"

# A run still going from the last interval: skip this one (UNKNOWN) rather than pile up.
ddx_health_lock_wait=0
ddx_health_run DDX_HEALTH_LEVEL --slurm-drain --slurm-resume
exit "$DDX_HEALTH_RC"
