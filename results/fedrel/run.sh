#!/usr/bin/env bash
# The FedRel results grid (README "FedRel"): every run is one `secure-fedgraph run fedrel` command,
# printed before it runs; metrics land in results/fedrel/<dataset>/<name>/metrics.json.
# Usage: results/fedrel/run.sh [PARALLEL]   (from the repository root; ../shared/data holds the UEA archives)
set -euo pipefail
cd "$(dirname "$0")/../.."
parallel="${1:-1}"
commands() {
  for dataset in basicmotions japanesevowels; do
    if [ "$dataset" = basicmotions ]; then split=class; every=1; else split=speaker; every=5; fi
    common="--backend plain --rounds 150 --data-dir ../shared/data --set dataset=$dataset --set local_steps=5 --set eval_every=$every"
    for seed in 0 1 2; do
      echo ".venv/bin/secure-fedgraph run fedrel --clients 1 $common --set aggregation=uniform --set seed=$seed --out results/fedrel/$dataset/centralised-s$seed"
    done
    for k in 2 3 5; do
      for seed in 0 1 2; do
        for aggregation in relevance uniform; do
          name=$([ $aggregation = relevance ] && echo fedrel || echo fedavg)
          echo ".venv/bin/secure-fedgraph run fedrel --clients $k $common --set split=$split --set aggregation=$aggregation --set seed=$seed --out results/fedrel/$dataset/$name-k$k-s$seed"
        done
      done
    done
  done
}
commands | xargs -P "$parallel" -I{} sh -c 'echo "$ {}"; {} > /dev/null'
