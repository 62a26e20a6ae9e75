"""Where do FedRel and FedAvg part at K = 2? Runs both aggregations for 3 rounds with
results/fedrel/run.sh's BasicMotions settings (split=class, 5 local steps, seed 0, plain backend),
records what each participant puts into each round's sum (the hook tests/papers/test_fedrel.py
uses), and prints, per round: the relevance run's e_1/e_2 - 1, and the largest difference between
the two runs' DIIG weights Theta_k going into that round's aggregation (relevance: the e_k Theta_k
contribution divided by e_k)."""

import sys

import numpy as np

from secure_fedgraph.papers.fedrel import FedRel, FedRelConfig
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig
from secure_fedgraph.runs import simulate as simulate_module
from secure_fedgraph.runs.simulate import simulate
from secure_fedgraph.training.relevance import PREFIX, WEIGHT

ROUNDS = 3


def run(aggregation):
    inputs = []  # (sum name, client, {tensor name: float64 array}) in the order contributed
    original = simulate_module.ClientHost

    class RecordingHost(original):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.on_contribute = lambda h, name, tensors, client=self.client_id: inputs.append(
                (name, client, {k: np.array(v, dtype=np.float64) for k, v in tensors.items()}))

    simulate_module.ClientHost = RecordingHost
    try:
        config = FedRelConfig(dataset="basicmotions", clients=2, split="class", aggregation=aggregation, rounds=ROUNDS,
                              local_steps=5, eval_every=1, seed=0)
        simulate(FedRel(config), SecureSumConfig(backend=Backend.PLAIN), data_dir=sys.argv[1])
    finally:
        simulate_module.ClientHost = original
    per_round = {}  # client -> list over rounds of (theta dict, e or None)
    for name, client, tensors in inputs:
        if name == "relevance":
            e = float(tensors[WEIGHT][0])
            theta = {k[len(PREFIX):]: v / e for k, v in tensors.items() if k.startswith(PREFIX + "diig.")}
            per_round.setdefault(client, []).append((theta, e))
        elif name == "weights":
            per_round.setdefault(client, []).append(({k: v for k, v in tensors.items() if k.startswith("diig.")}, None))
    return per_round


relevance, uniform = run("relevance"), run("uniform")
for r in range(ROUNDS):
    e = [relevance[k][r][1] for k in sorted(relevance)]
    diff = max(float(np.max(np.abs(relevance[k][r][0][n] - uniform[k][r][0][n]))) for k in sorted(relevance) for n in uniform[k][r][0])
    scale = max(float(np.max(np.abs(v))) for k in sorted(uniform) for v in uniform[k][r][0].values())
    print(f"round {r}: e_1/e_2 - 1 = {e[0] / e[1] - 1:.3e}; largest |Theta_k(relevance) - Theta_k(uniform)| going into the sum = {diff:.3e} "
          f"(largest |Theta_k| {scale:.3f})")
