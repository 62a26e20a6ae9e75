#!/usr/bin/env bash
# The nFedGNN results (docs/papers/nfedgnn.md): every run is one command, printed before it runs;
# metrics land in results/nfedgnn/<dataset>/<model>-<method>-s<seed>/metrics.json.
# Usage: results/nfedgnn/run.sh [PARALLEL] [DATASET...]   from the repository root, with the
# Planetoid files in ../shared/data/planetoid. Per dataset (Cora CiteSeer) and model (MODELS,
# default "gcn gat"): centralised PyG, nFedGNN without and with the Laplacian term, the
# CNFGNN baseline as the paper adapts it (each user's own Adam step, then the W_i averaged) and
# one shared W trained by FedSGD (the users' gradients summed); the last two GCN only: GAT's
# F x 128 weights per user make 2,708 users' Adam states 12 GB. 3 seeds each, 200 rounds, in-process.
# ONLY=REGEX runs just the commands that match, SKIP=REGEX leaves out those that match; finished
# runs are skipped. The users start from the seeded W^(0) (user_randomness=run_seed: the
# centralised model's start, and reproducible by seed; the secure default draws each user's own). Each run uses one OpenMP thread (OMP_NUM_THREADS, unless set): several runs
# at once with torch's default threads each spin for cores they share.
set -euo pipefail
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
cd "$(dirname "$0")/../.."
parallel="${1:-1}"
shift || true
datasets="${*:-Cora CiteSeer}"
models="${MODELS:-gcn gat}"
lambda() {  # lambda DATASET MODEL: the Laplacian weight, chosen on Cora GCN seed 0's best validation accuracy
  echo 0.001  # over 200 rounds (evaluating every 10) among 1e-3, 3e-3, 1e-2, 3e-2, 1e-1; results/nfedgnn/lambda-probe/
}
fed() {  # fed DATASET MODEL NAME OPTIONS...
  local dataset=$1 model=$2 name=$3; shift 3
  echo ".venv/bin/secure-fedgraph run nfedgnn --backend plain --data-dir ../shared/data --set dataset=$dataset --set model=$model --set user_randomness=run_seed $* --out results/nfedgnn/$dataset/$model-$name"
}
commands() {
  for model in $models; do
    for dataset in $datasets; do
      for seed in 0 1 2; do
        echo ".venv/bin/python -m secure_fedgraph.runs.node_centralised --dataset $dataset --model $model --seed $seed --data-dir ../shared/data --out results/nfedgnn/$dataset/$model-centralised-s$seed"
        fed "$dataset" "$model" "nfedgnn-s$seed" --set seed=$seed
        fed "$dataset" "$model" "nfedgnn-lap-s$seed" --set seed=$seed --set laplacian="$(lambda "$dataset" "$model")"
        if [ "$model" = gcn ]; then
          fed "$dataset" "$model" "cnfgnn-s$seed" --set seed=$seed --set user_weights=fedavg
          fed "$dataset" "$model" "fedsgd-s$seed" --set seed=$seed --set user_weights=fedsgd
        fi
      done
    done
  done
}
commands | grep -E "${ONLY:-.}" | grep -vE "${SKIP:-^$}" | while read -r line; do
  out=${line##* --out }
  [ -f "$out/metrics.json" ] || echo "$line"   # skip runs already done
done | xargs -P "$parallel" -I{} sh -c 'echo "$ {}"; {} > /dev/null'
