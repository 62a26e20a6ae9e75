#!/usr/bin/env bash
# docs/papers/cnfgnn.md keeps scheduled sampling's c = 1000 (the paper's default) and quotes a
# one-round trial on 40 sensors against c = 1. This is that trial: CNFGNN (AT + FedAvg), the first 40
# sensors, one round, seed 0, plain backend (mask gives the plain numbers: a test), c = 1000 and c = 1.
# Usage: results/cnfgnn-scheduled-sampling/run.sh   from the repository root.
set -euo pipefail
cd "$(dirname "$0")/../.."
for c in 1000 1; do
  out=results/cnfgnn-scheduled-sampling/c-$c
  [ -f $out/metrics.json ] || (set -x; nice -n 19 .venv/bin/secure-fedgraph run cnfgnn --backend plain --rounds 1 --set sensors=40 \
    --set cl_decay_steps=$c --set seed=0 --out $out --quiet)
  .venv/bin/python -c '
import json, sys
m = json.load(open(sys.argv[1] + "/metrics.json"))
print(sys.argv[1], "val RMSE", round(m["rounds"][-1]["val_rmse"], 3), "test RMSE", round(m["test_rmse"], 3), "seconds", round(m["seconds"], 1))' $out
done
