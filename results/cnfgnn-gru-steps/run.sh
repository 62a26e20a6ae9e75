#!/usr/bin/env bash
# Is the centralised GRU last in results/compare-cnfgnn-e3 because it takes few optimiser steps?
# That run gave it CNFGNN's batch of 256 windows (x 207 sensors): 6 steps an epoch, 18 in 3 epochs,
# where each federated client takes 11 a round (batch 128, 1,395 training windows), 33 in all.
# Step 1 reruns its first epoch (batch 256) to check that today's code and data give that run's
# validation RMSE after epoch 1 (10.705). Step 2 trains it 3 epochs at batch 128: 11 steps an epoch,
# 33 in all, the federated clients' count; everything else as in `compare --epochs 3`.
# Usage: results/cnfgnn-gru-steps/run.sh STEP   (1 or 2), from the repository root. Writes STEP.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
step=$1
nice -n 19 .venv/bin/python - "$step" <<'PY'
import json, sys, time, resource
from secure_fedgraph.training.centralised import CentralisedConfig, train_centralised_gru
step = sys.argv[1]
kw = dict(epochs=1, batch_size=256) if step == "1" else dict(epochs=3, batch_size=128)
config = CentralisedConfig(seed=0, device="cpu", **kw)   # compare's: seed 0, packaged METR-LA week
result = train_centralised_gru(config, None, print)
out = {**result.metrics(), "cpu_seconds": resource.getrusage(resource.RUSAGE_SELF).ru_utime + resource.getrusage(resource.RUSAGE_SELF).ru_stime}
json.dump(out, open(f"results/cnfgnn-gru-steps/{step}.json", "w"), indent=2)
print(json.dumps({k: out[k] for k in ("test_rmse", "test_mae", "best_val_rmse", "best_epoch", "cpu_seconds")}))
PY
