#!/bin/sh
# Which clip the nFedGNN sweep uses (docs/papers/nfedgnn.md, "The sweep"): the sweep's run
# (Cora GCN, 200 rounds, evaluating every 10) with each clip and a noise multiplier of 1e-4
# (noise 1e4 times below the clip in every coordinate), so that clipping, not noise, is what
# differs from the non-private run. Seed 0, about 5 minutes a run on one core beside other work (290 to 319 s).
# Usage: sh results/sweep-nfedgnn/clip-probe/run.sh [DATA_DIR]   from the repository root.
set -e
DATA=${1:-../shared/data}
HERE=$(dirname "$0")
for clip in ${CLIPS:-0.05 0.5 2}; do
  out="$HERE/clip-$clip-seed0"
  [ -f "$out/metrics.json" ] || OMP_NUM_THREADS=1 secure-fedgraph run nfedgnn --rounds 200 --set eval_every=10 --set dp_clip=$clip \
    --set dp_sigma=0.0001 --set user_randomness=run_seed --set seed=0 --backend plain --data-dir "$DATA" --out "$out"
done
