"""An nFedGNN user's first-layer half: its Adam is torch's, and keeping only the rows its
features use changes nothing it computes or sends."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from secure_fedgraph.training.node_user import Adam, NodeUser


def test_adam_is_torchs_adam_with_l2_weight_decay():
    rng = np.random.default_rng(0)
    start = rng.normal(size=(5, 3)).astype(np.float32)
    ours = Adam(start.copy(), lr=0.1, weight_decay=5e-4)
    theirs = torch.nn.Parameter(torch.tensor(start))
    optimiser = torch.optim.Adam([theirs], lr=0.1, weight_decay=5e-4)
    for _ in range(50):
        grad = rng.normal(size=(5, 3)).astype(np.float32)
        ours.step(grad)
        theirs.grad = torch.tensor(grad)
        optimiser.step()
    np.testing.assert_allclose(ours.param, theirs.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert not np.allclose(ours.param, start)


@pytest.mark.parametrize("dropout", [0.0, 0.5])
def test_keeping_only_the_used_rows_is_exact(dropout):
    rng = np.random.default_rng(1)
    x = np.zeros(40, dtype=np.float32)
    x[[3, 17, 29]] = [0.2, 0.5, 0.3]
    w0 = rng.normal(size=(40, 4)).astype(np.float32)
    sparse = NodeUser(x, w0, lr=0.1, weight_decay=5e-4, dropout=dropout)
    full = NodeUser(x, w0, lr=0.1, weight_decay=5e-4, dropout=dropout, all_rows=True)
    assert sparse.weight.shape == (3, 4) and full.weight.shape == (40, 4)
    for r in range(20):
        h_sparse, h_full = sparse.latent(np.random.default_rng(r).random(sparse.features)), full.latent(np.random.default_rng(r).random(full.features))
        np.testing.assert_allclose(h_sparse, h_full, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(sparse.latent(), full.latent(), rtol=1e-5, atol=1e-6)
        grad = rng.normal(size=4).astype(np.float32)
        sparse.step(grad)
        full.step(grad)
    np.testing.assert_allclose(sparse.weight, full.weight[[3, 17, 29]], rtol=1e-5, atol=1e-6)
    assert not np.allclose(full.weight[0], w0[0])  # weight decay moved the unused rows, which never reach h_i
    with pytest.raises(RuntimeError, match="only the rows"):
        sparse.full_weight()
    with pytest.raises(RuntimeError, match="without a training latent"):
        sparse.step(grad)
