#!/usr/bin/env bash
# What the paper's CNFGNN-adapted baseline must have been (README.md here): Cora, GCN, seed 0,
# 200 rounds, users starting from the seeded W^(0), one run per way of sharing the first layer.
# From the repository root with the Planetoid files in ../shared/data/planetoid; metrics land in
# results/nfedgnn/baseline-probe/<variant>/metrics.json; finished runs are skipped.
set -euo pipefail
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
cd "$(dirname "$0")/../../.."
here=results/nfedgnn/baseline-probe
run() {  # run NAME OPTIONS...
  local name=$1; shift
  [ -f "$here/$name/metrics.json" ] && return 0
  local cmd=".venv/bin/secure-fedgraph run nfedgnn --backend plain --data-dir ../shared/data --set dataset=${DATASET:-Cora} --set model=gcn --set user_randomness=run_seed --set seed=0 $* --out $here/$name"
  echo "\$ $cmd"
  $cmd > /dev/null
}
for variant in ${VARIANTS:-fedavg fedsgd}; do
  run "$variant" --set user_weights="$variant" "${EXTRA:-}"
done
