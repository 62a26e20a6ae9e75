"""How often Adam's L2 decay term outweighs a user's own gradient (Cora, GCN, round 0, the
seeded W^(0), no dropout): per user with a non-zero dL/dW_i, the share of its touched entries
where |5e-4 W| > |dL/dW|. Run from the repository root:

    .venv/bin/python results/nfedgnn/decay-probe/gradient_against_decay.py ../shared/data
"""

import sys

import numpy as np
import torch
import torch.nn.functional as F

from secure_fedgraph.papers.nfedgnn import NFedGNN, NFedGNNConfig, initial_user_weight

data = sys.argv[1] if len(sys.argv) > 1 else "../shared/data"
plan = NFedGNN(NFedGNNConfig(user_randomness="run_seed"))
graph = plan.load_server_data(data)
x = np.stack([plan.load_client_data(i, data) for i in range(graph.nodes)])
w = initial_user_weight(0, graph.features, 16)
h = torch.as_tensor(x @ w).requires_grad_()
model = plan.server_model(graph).eval()
F.cross_entropy(model(h, graph.edge_index)[graph.train_mask], graph.y[graph.train_mask]).backward()
g = h.grad.numpy()
reached = np.flatnonzero(np.abs(g).sum(1) > 0)
shares = []
for i in reached:
    rows = np.flatnonzero(x[i])
    grad = np.outer(x[i, rows], g[i])
    shares.append(float(np.mean(np.abs(5e-4 * w[rows]) > np.abs(grad))))
shares = np.array(shares)
print(f"users: {graph.nodes}; with a zero gradient: {graph.nodes - reached.size}; with a non-zero one: {reached.size}")
print(f"share of a reached user's touched entries where the decay term outweighs the gradient: median {np.median(shares):.2f}, "
      f"users where it is over half: {np.mean(shares > 0.5):.2f}")
print(f"|dL/dh_i| of reached users: median {np.median(np.abs(g[reached]).max(1)):.2e}; |W^(0)| median {np.median(np.abs(w)):.2e}")
