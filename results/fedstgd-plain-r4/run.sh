#!/usr/bin/env bash
# docs/papers/fedstgd.md says some Table 3 ablations ran with the plain backend because mask gives
# plain's numbers within the encoding error. This run is results/fedstgd-r25/fedstgd.json's command
# (mask, 4 clients, seed 0, gradient_clip 1e6 as that file records) with the plain backend, for the
# first 4 rounds (the learning rate first decays after round 5, so rounds 0-3 are the same schedule),
# and prints each round's validation RMSE beside the mask run's.
# Usage: results/fedstgd-plain-r4/run.sh   from the repository root.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ ! -f results/fedstgd-plain-r4/plain/metrics.json ]; then   # the run, once
  set -x
  nice -n 19 .venv/bin/secure-fedgraph run fedstgd --clients 4 --backend plain --rounds 4 --set gradient_clip=1e6 \
    --data-dir ../shared/data --out results/fedstgd-plain-r4/plain --quiet
  set +x
fi
.venv/bin/python -c '
import json
plain = json.load(open("results/fedstgd-plain-r4/plain/metrics.json"))["rounds"]
mask = json.load(open("results/fedstgd-r25/fedstgd.json"))["rounds"]
for p, m in zip(plain, mask):
    r, a, b = p["round"], p["rmse"], m["rmse"]
    print(f"round {r}: val RMSE plain {a:.6f}, mask (results/fedstgd-r25/fedstgd.json) {b:.6f}, difference {a - b:.2e}")'
