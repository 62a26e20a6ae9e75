#!/bin/sh
# CNFGNN's accuracy against privacy (docs/privacy.md, "Accuracy against privacy budget"): the
# packaged METR-LA week, the first 20 sensors, at most 200 windows per split, 10 rounds, six noise
# multipliers on the uploaded hidden states, three seeds, beside the same run without noise and
# the centralised GRU + GN at the same budget. Plain and mask give the same numbers (CNFGNN's
# equality tests), so plain is used. How the scale was chosen: scale-probe/ and docs/privacy.md.
# About 14 minutes on one core of the 2-core machine, measured beside other runs (24 runs of 19 to 41 s).
# Usage: sh results/sweep-cnfgnn/run.sh [JOBS]   from the repository root.
set -e
JOBS=${1:-2}
HERE=$(dirname "$0")
OMP_NUM_THREADS=1 secure-fedgraph sweep cnfgnn --sigmas 0.5,1,2,4,8,16 --seeds 0,1,2 --rounds 10 --set sensors=20 --set max_windows=200 \
  --backend plain --jobs "$JOBS" --out "$HERE"
