#!/usr/bin/env bash
# The λ probe (README.md here): Cora, GCN, seed 0, 200 rounds (as the table's runs), one run per λ, from the
# repository root with the Planetoid files in ../shared/data/planetoid; each run's metrics.json
# is kept as lambda-L.json. Finished λs are skipped.
set -euo pipefail
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
cd "$(dirname "$0")/../../.."
here=results/nfedgnn/lambda-probe
for lambda in ${LAMBDAS:-0.001 0.003 0.01 0.03 0.1}; do
  [ -f "$here/lambda-$lambda.json" ] && continue
  out=$(mktemp -d)
  cmd=".venv/bin/secure-fedgraph run nfedgnn --backend plain --rounds 200 --set eval_every=10 --set user_randomness=run_seed --set laplacian=$lambda --data-dir ../shared/data --out $out"
  echo "\$ $cmd"
  $cmd > /dev/null
  cp "$out/metrics.json" "$here/lambda-$lambda.json"
  rm -rf "$out"
done
