#!/bin/sh
# nFedGNN (GCN, per-user W_i) on all 2,708 Cora users, 10 rounds (evaluating every 5), clip
# 0.05, once per DP noise multiplier and once without DP, each run audited from every party's
# transcript (secure-fedgraph sweep --attacks); then the sigma 1 run and the run without DP audited
# from the server's transcript alone. The transcripts (about 70 MB per run) are not kept here:
# points/*/ holds each run's metrics.json, output and audit/. The sweep's users draw W^(0) and their
# dropout masks from the run seed (user_randomness=run_seed), which the server knows: what the
# attacks can do against that opt-in. private/ is the default, each user's own randomness
# (threat_model.md NF-INIT), without DP and at sigma 1.
# Usage: sh results/audit-nfedgnn/run.sh [DATA_DIR]   (about 18 minutes for the sweep on 2 shared cores)
set -e
DATA=${1:-../shared/data}
HERE=$(dirname "$0")
OMP_NUM_THREADS=1 secure-fedgraph sweep nfedgnn --sigmas 0.03,0.1,0.3,1,3 --rounds 10 --set eval_every=5 --set dp_clip=0.05 \
  --set user_randomness=run_seed --attacks --data-dir "$DATA" --out "$HERE"
OMP_NUM_THREADS=1 secure-fedgraph sweep nfedgnn --sigmas 1 --rounds 10 --set eval_every=5 --set dp_clip=0.05 \
  --attacks --data-dir "$DATA" --out "$HERE/private"
for point in sigma-1-seed0 non-private-seed0; do
  secure-fedgraph audit "$HERE/points/$point" --out "$HERE/server-only-$point" --data-dir "$DATA"
done
