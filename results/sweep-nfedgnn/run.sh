#!/bin/sh
# nFedGNN's accuracy against privacy (docs/papers/nfedgnn.md, "The sweep"): Cora, GCN, all 2,708
# users, 200 rounds (the table's), evaluating every 10 rounds (each evaluation is one more
# release per user), clip 0.5 (chosen by clip-probe/), six noise multipliers on the latents, three seeds, beside the
# same run without noise and the whole-graph PyG GCN for 200 epochs (the centralised reference).
# The users start from the seeded W^(0) (user_randomness=run_seed) so that a seed repeats; the
# per-user rounds hold no secure sum, so plain and mask give the same numbers (plain is used).
# Usage: sh results/sweep-nfedgnn/run.sh [DATA_DIR] [JOBS]   from the repository root.
set -e
DATA=${1:-../shared/data}
JOBS=${2:-2}
HERE=$(dirname "$0")
OMP_NUM_THREADS=1 secure-fedgraph sweep nfedgnn --sigmas 0.125,0.25,0.5,1,2,4 --seeds 0,1,2 --rounds 200 --set eval_every=10 \
  --set dp_clip=0.5 --set user_randomness=run_seed --backend plain --data-dir "$DATA" --jobs "$JOBS" --out "$HERE"
