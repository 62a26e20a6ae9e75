#!/bin/sh
# What the clip alone costs in the CNFGNN sweep (docs/privacy.md): the sweep's runs with the
# default dp_clip (2.0) and a noise multiplier of 1e-4, so that clipping the uploaded hidden
# states, not noise, is what differs from the non-private runs. Three seeds, under a minute each.
# Usage: sh results/sweep-cnfgnn/clip-probe/run.sh   from the repository root.
set -e
HERE=$(dirname "$0")
for seed in 0 1 2; do
  [ -f "$HERE/seed$seed/metrics.json" ] || OMP_NUM_THREADS=1 secure-fedgraph run cnfgnn --rounds 10 --set sensors=20 --set max_windows=200 \
    --set dp_sigma=0.0001 --set seed=$seed --backend plain --out "$HERE/seed$seed"
done
