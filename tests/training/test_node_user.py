"""An nFedGNN user's first-layer half: its Adam is torch's, and keeping only the rows its
features use changes nothing it computes or sends."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from secure_fedgraph.training.node_user import Adam, NodeUser


@pytest.mark.parametrize("decoupled,torch_optimiser", [(False, torch.optim.Adam), (True, torch.optim.AdamW)])
def test_adam_is_torchs_adam_with_l2_decay_or_adamw_where_every_entry_has_a_gradient(decoupled, torch_optimiser):
    """L2 in the gradient is torch's Adam; decoupled decay where the gradient reaches is torch's
    AdamW wherever every entry has a gradient (here: always)."""
    rng = np.random.default_rng(0)
    start = rng.normal(size=(5, 3)).astype(np.float32)
    ours = Adam(start.copy(), lr=0.1, weight_decay=5e-2, decoupled_where_touched=decoupled)
    theirs = torch.nn.Parameter(torch.tensor(start))
    optimiser = torch_optimiser([theirs], lr=0.1, weight_decay=5e-2)
    for _ in range(50):
        grad = rng.normal(size=(5, 3)).astype(np.float32)
        ours.step(grad)
        theirs.grad = torch.tensor(grad)
        optimiser.step()
    np.testing.assert_allclose(ours.param, theirs.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert not np.allclose(ours.param, start)


@pytest.mark.parametrize("decoupled", [True, False])
def test_a_user_the_training_signal_never_reaches_stays_where_it_is(decoupled):
    """Gao et al. Sec. 3.3: a user more than two hops from every labelled node gets dL/dh_i = 0
    and keeps its model. With L2 decay in Adam's gradient it would move a full lr step a round."""
    x = np.zeros(30, dtype=np.float32)
    x[[2, 9, 21]] = [0.5, 0.25, 0.25]
    w0 = np.random.default_rng(3).normal(size=(30, 4)).astype(np.float32)
    user = NodeUser(x, w0, lr=0.1, weight_decay=5e-4, dropout=0.5)
    user.optimiser.decoupled_where_touched = decoupled
    for r in range(20):
        user.latent(np.random.default_rng(r).random(30))
        user.step(np.zeros(4, dtype=np.float32))
    moved = float(np.abs(user.weight - w0[[2, 9, 21]]).max())
    if decoupled:
        assert moved == 0.0
    else:
        assert moved > 0.5  # twenty steps of about lr each, from decay alone


@pytest.mark.parametrize("decoupled", [True, False])
def test_a_user_the_training_signal_barely_reaches_moves_by_its_gradient_not_by_decay(decoupled):
    """A user two hops out gets a gradient far below 5e-4 x W: Adam normalises the L2 term into
    a step of about lr along -W (shrinking W towards zero); decoupled decay shrinks W by only
    lr x 5e-4 a step, and the user follows its own gradient."""
    x = np.zeros(20, dtype=np.float32)
    x[[1, 7]] = [0.5, 0.5]
    w0 = np.full((20, 2), 0.05, dtype=np.float32)
    user = NodeUser(x, w0, lr=0.1, weight_decay=5e-4, dropout=0.0)
    user.optimiser.decoupled_where_touched = decoupled
    for _ in range(20):
        user.latent(np.ones(20))
        user.step(np.array([-1e-7, -1e-7], dtype=np.float32))  # the loss asks W to grow, very gently
    grew = bool((user.weight > 0.05).all())
    assert grew == decoupled  # L2-in-Adam drives it the other way, to below 0.05 - lr steps


def test_decay_reaches_only_the_rows_this_steps_dropout_kept():
    x = np.zeros(10, dtype=np.float32)
    x[[1, 4]] = [0.5, 0.5]
    w0 = np.ones((10, 2), dtype=np.float32)
    user = NodeUser(x, w0, lr=0.1, weight_decay=5e-4, dropout=0.5)
    keep_row_1 = np.full(10, 0.9)  # dropout 0.5: uniforms >= 0.5 keep the feature
    keep_row_1[4] = 0.1  # row 4's feature is dropped this step: no gradient reaches it
    user.latent(keep_row_1)
    user.step(np.array([1.0, -1.0], dtype=np.float32))
    assert not np.allclose(user.weight[0], 1.0) and np.array_equal(user.weight[1], [1.0, 1.0])


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
    np.testing.assert_array_equal(full.weight[0], w0[0])  # no gradient ever reaches the unused rows: decay leaves them be
    with pytest.raises(RuntimeError, match="only the rows"):
        sparse.full_weight()
    with pytest.raises(RuntimeError, match="without a training latent"):
        sparse.step(grad)
