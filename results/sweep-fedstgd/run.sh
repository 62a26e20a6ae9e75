#!/bin/sh
# FedSTGD with one epsilon for everything it releases (docs/papers/fedstgd.md, "One epsilon for
# everything a run releases"): ddp_noise = dpsgd_sigma at 1, 4 and 16 over 3 rounds on HZMetro,
# 4 clients, the paper's model sizes, one seed, beside the same run without DP; then the
# DP-SGD-only run the page's table sets beside them (its epsilon covers the gradients only).
# Usage: sh results/sweep-fedstgd/run.sh [DATA_DIR] [JOBS]   from the repository root
# (each private run 13 to 18 minutes on 2 shared cores).
set -e
DATA=${1:-../shared/data}
JOBS=${2:-2}
HERE=$(dirname "$0")
secure-fedgraph sweep fedstgd --sigmas 1,4,16 --rounds 3 --data-dir "$DATA" --jobs "$JOBS" --out "$HERE"
secure-fedgraph run fedstgd --rounds 3 --set dpsgd_sigma=1 --data-dir "$DATA" --out "$HERE/dpsgd-only-sigma-1"
