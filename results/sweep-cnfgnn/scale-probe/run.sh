#!/bin/sh
# How the CNFGNN sweep's scale was chosen (docs/privacy.md): the same sweep at 2 rounds (five
# noise multipliers, three seeds; about 3 minutes) and a 10-round probe at two multipliers
# (three seeds, no centralised reference; about 6 minutes).
# Usage: sh results/sweep-cnfgnn/scale-probe/run.sh   from the repository root.
set -e
HERE=$(dirname "$0")
OMP_NUM_THREADS=1 secure-fedgraph sweep cnfgnn --sigmas 0.5,1,2,4,8 --seeds 0,1,2 --rounds 2 --set sensors=20 --set max_windows=200 \
  --backend plain --jobs 1 --out "$HERE/rounds-2"
OMP_NUM_THREADS=1 secure-fedgraph sweep cnfgnn --sigmas 2,8 --seeds 0,1,2 --rounds 10 --set sensors=20 --set max_windows=200 \
  --backend plain --jobs 1 --no-centralised --out "$HERE/rounds-10"
