#!/bin/sh
# CNFGNN (AT + FedAvg, mask) on the packaged METR-LA week: 207 sensors, one round, 8 server
# batches, audited per DP noise level; then the attack errors against epsilon.
# Usage: sh results/audit-cnfgnn/run.sh [WORK_DIR]   (about 30 minutes on 2 idle cores)
set -e
WORK=${1:-/tmp/audit-cnfgnn}
HERE=$(dirname "$0")
for sigma in 0 0.1 0.3 1; do
  secure-fedgraph run cnfgnn --rounds 1 --set max_server_batches=8 --dp-sigma "$sigma" --transcript --out "$WORK/sigma-$sigma"
  secure-fedgraph audit "$WORK/sigma-$sigma" "$WORK/sigma-$sigma/clients" --out "$WORK/sigma-$sigma/audit"
done
python -m secure_fedgraph.audit.curves "$HERE/leakage-against-epsilon.png" "$WORK"/sigma-*/audit/audit.json
