#!/usr/bin/env bash
# What the paper's CNFGNN-adapted baseline must have been (README.md here): the table's two
# shared-W rows on Cora, GCN, seed 0, 200 rounds (results/nfedgnn/run.sh's commands; finished
# runs are skipped): results/nfedgnn/Cora/gcn-cnfgnn-s0 and gcn-fedsgd-s0.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ONLY='Cora/gcn-(cnfgnn|fedsgd)-s0' results/nfedgnn/run.sh 1
