#!/usr/bin/env bash
# The FedRel results (docs/papers/fedrel.md): every run is one `secure-fedgraph run fedrel` command,
# printed before it runs; metrics land in results/fedrel/<dataset>/<name>/metrics.json.
# Usage: results/fedrel/run.sh [PARALLEL] [DATASET...]   from the repository root, with the UEA
# archives in ../shared/data. Both data sets: K in {2, 3, 5}, FedRel and FedAvg, and centralised,
# 3 seeds each.
set -euo pipefail
cd "$(dirname "$0")/../.."
parallel="${1:-1}"
shift || true
datasets="${*:-japanesevowels basicmotions}"
run() {  # run DATASET NAME OPTIONS...
  local dataset=$1 name=$2; shift 2
  echo ".venv/bin/secure-fedgraph run fedrel $* --backend plain --rounds 150 --data-dir ../shared/data --set dataset=$dataset --set local_steps=5 --out results/fedrel/$dataset/$name"
}
commands() {
  for dataset in $datasets; do
    if [ "$dataset" = basicmotions ]; then split=class; every=1; else split=speaker; every=5; fi
    for seed in 0 1 2; do
      run "$dataset" "centralised-s$seed" --clients 1 --set aggregation=uniform --set eval_every=$every --set seed=$seed
    done
    for k in 2 3 5; do
      for seed in 0 1 2; do
        for aggregation in relevance uniform; do
          name=$([ $aggregation = relevance ] && echo fedrel || echo fedavg)
          run "$dataset" "$name-k$k-s$seed" --clients "$k" --set split=$split --set aggregation=$aggregation --set eval_every=$every --set seed=$seed
        done
      done
    done
  done
}
commands | grep -E "${ONLY:-.}" | while read -r line; do   # ONLY=REGEX: just the runs whose command matches
  out=${line##* --out }
  [ -f "$out/metrics.json" ] || echo "$line"   # skip runs already done
done | xargs -P "$parallel" -I{} sh -c 'echo "$ {}"; {} > /dev/null'
