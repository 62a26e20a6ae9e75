#!/bin/sh
# CNFGNN (AT + FedAvg, mask) on the packaged METR-LA week: 207 sensors, one round, 8 server
# batches, the first 300 windows of each split, audited (from every party's transcript) per DP
# noise level; then the attack errors against epsilon. Each sigma-S/ folder here holds that
# run's audit (audit.md, audit.json, figures); sigma-0 is the run without DP.
# Usage: sh results/audit-cnfgnn/run.sh [WORK_DIR]   (about 17 minutes on 2 shared cores)
set -e
WORK=${1:-/tmp/audit-cnfgnn-runs}
HERE=$(dirname "$0")
for sigma in 0 0.1 0.3 1 4; do
  secure-fedgraph run cnfgnn --rounds 1 --set max_server_batches=8 --set max_windows=300 --dp-sigma "$sigma" --transcript --out "$WORK/sigma-$sigma"
  secure-fedgraph audit "$WORK/sigma-$sigma" "$WORK/sigma-$sigma/clients" --out "$HERE/sigma-$sigma" || true  # a FAIL is a finding: keep going
done
python -m secure_fedgraph.audit.curves "$HERE/leakage-against-epsilon.png" "$HERE"/sigma-*/audit.json
