#!/bin/bash
# SLURM Prolog: `ddx health --level $DDX_PROLOG_LEVEL` (1 by default) before each job on each of
# its nodes. On CRITICAL ddx
# drains the node (reason "ddx: ...") and this script fails, so that SLURM requeues the job onto
# other nodes instead of running it on a bad one. Everything else lets the job start: WARN, and
# UNKNOWN (ddx could not check, could not start, or ran out of time), because a fault of ddx
# itself must never stop a cluster's jobs.
#
#   slurm.conf:  Prolog=/opt/ddx/examples/slurm/prolog.sh
#                PrologFlags=Alloc          # run it when the job is allocated, before any step
#                SchedulerParameters=nohold_on_prolog_fail   # requeue without holding the job
#
# Configuration: ddx-health-lib.sh (DDX_HEALTH_CONFIG, else /etc/ddx/health.conf).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=ddx-health-lib.sh
source "$here/ddx-health-lib.sh"

ddx_health_run DDX_PROLOG_LEVEL --slurm-drain
[[ $DDX_HEALTH_RC == 2 ]] && exit 1
exit 0
