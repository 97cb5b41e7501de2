#!/bin/bash
# SLURM Epilog: `ddx health --level $DDX_EPILOG_LEVEL` (1 by default) after each job on each of
# its nodes, so that a fault the
# job met (an XID, an ECC error, a full scratch disk) drains the node before the next job lands
# there, with a reason "ddx: ..." in `sinfo -R`. Fails (SLURM then drains the node too) only on
# CRITICAL; UNKNOWN and anything ddx could not do leave the node in service.
#
#   slurm.conf:  Epilog=/opt/ddx/examples/slurm/epilog.sh
#
# Configuration: ddx-health-lib.sh (DDX_HEALTH_CONFIG, else /etc/ddx/health.conf).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=ddx-health-lib.sh
source "$here/ddx-health-lib.sh"

ddx_health_run DDX_EPILOG_LEVEL --slurm-drain
[[ $DDX_HEALTH_RC == 2 ]] && exit 1
exit 0
