"""FedRel's DIIG modules against the paper's equations written densely, on ISRUC_S3's shape."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from secure_fedgraph.models.diig import DIIG
from secure_fedgraph.models.diig_message import DIIGMessage
from secure_fedgraph.models.distribution_estimator import DistributionEstimator
from secure_fedgraph.models.distribution_vae import DistributionVAE
from secure_fedgraph.models.dynamic_correlation import DynamicCorrelation, complete_edges
from secure_fedgraph.models.feature_transform import FeatureTransform
from secure_fedgraph.models.generator_dropout import GeneratorDropout, use_generator
from secure_fedgraph.models.inter_temporal import InterTemporalBlock
from secure_fedgraph.models.intra_spatial import IntraSpatialBlock
from secure_fedgraph.training.device import single_thread
from tests.helpers import ISRUC_DIR, needs_isruc

N = 10  # ISRUC_S3's channels


def _dense_msg(layer: DIIGMessage, a: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """Eq. 2 as printed: sigma(W (H ⊕ (1/N) A H)), per graph."""
    return F.elu(layer.lin(torch.cat([h, a @ h / h.shape[-2]], dim=-1)))


def _dense_correlation(layer: DynamicCorrelation, receivers: torch.Tensor, senders: torch.Tensor) -> torch.Tensor:
    """Eqs. 7 and 12 as printed: softmax_j(x_i^T W x_j)."""
    return torch.softmax(receivers @ layer.weight @ senders.transpose(-1, -2), dim=-1)


@pytest.fixture(autouse=True)
def one_thread():
    """As the plans' hosts run torch: two threads on a busy 2-core machine cost up to 100x."""
    with single_thread():
        yield


@pytest.fixture
def generator():
    return torch.Generator().manual_seed(0)


def test_complete_edges_cover_every_ordered_pair_once_per_graph():
    edges = complete_edges(2, 3)
    assert edges.shape == (2, 18)
    pairs = {tuple(p) for p in edges.T.tolist()}
    assert pairs == {(j + 3 * g, i + 3 * g) for g in range(2) for i in range(3) for j in range(3)}


def test_correlation_and_message_equal_the_dense_equations(generator):
    """Eq. 7 through PyG's per-receiver softmax and eq. 2 through MessagePassing's mean
    aggregation equal the matrix formulas; every row of A sums to 1."""
    g, d = 4, 6
    x = torch.randn(g, N, d, generator=generator)
    correlation, message = DynamicCorrelation(d), DIIGMessage(d, 5)
    correlation.reset_parameters(generator)
    edges = complete_edges(g, N)
    weight = correlation(x.reshape(-1, d), x.reshape(-1, d), edges)
    dense = _dense_correlation(correlation, x, x)
    torch.testing.assert_close(weight.reshape(g, N, N), dense)
    torch.testing.assert_close(dense.sum(-1), torch.ones(g, N))
    torch.testing.assert_close(message(x.reshape(-1, d), edges, weight).reshape(g, N, 5), _dense_msg(message, dense, x))


@needs_isruc
def test_intra_spatial_block_with_isruc_channel_graph_equals_eqs_8_and_9(generator):
    """With ISRUC_S3's channel distance matrix as a fixed adjacency (STFL's 'distance' graph, in
    place of eq. 7), two layers of eq. 8 and the readout of eq. 9 equal the dense formulas; with
    eq. 7 the learned adjacency has the matrix's shape and kind (rows summing to 1)."""
    from secure_fedgraph.data.isruc import isruc_channel_graph

    a = torch.as_tensor(isruc_channel_graph(ISRUC_DIR))
    block = IntraSpatialBlock(8, 6, 4)
    block.reset_parameters(generator)
    x = torch.randn(3, N, 8, generator=generator)
    h, graph, used = block(x, a)
    torch.testing.assert_close(used, a.expand(3, N, N))
    dense = x
    for layer in block.layers:
        dense = _dense_msg(layer, a, dense)
    torch.testing.assert_close(h, dense)
    torch.testing.assert_close(graph, F.elu(block.readout.pool(torch.cat([dense, x], -1).mean(dim=1))))
    _, _, learned = block(x)
    assert learned.shape == a.expand(3, N, N).shape
    torch.testing.assert_close(learned.sum(-1), torch.ones(3, N))
    assert not torch.allclose(learned, learned.transpose(-1, -2))  # asymmetric, like the distance matrix


@pytest.mark.parametrize("window", [0, 1, 2, 3])
def test_inter_temporal_recursion_is_eq_13(window, generator):
    """Eq. 13 written as its nested loop: for each t >= w start from H_fuse(t - w) and apply
    msg with A_tem(t - w + 1) .. A_tem(t), each A_tem from the fused graphs t and t - 1."""
    b, p, hidden, graph_features = 2, 4, 6, 3
    block = InterTemporalBlock(hidden, graph_features, window)
    block.reset_parameters(generator)
    h_spa, h_graph = torch.randn(b, p, N, hidden, generator=generator), torch.randn(b, p, graph_features, generator=generator)
    out = block(h_spa, h_graph)
    fused = block.norm(F.elu(block.fuse(torch.cat([h_spa, h_graph.unsqueeze(2).expand(b, p, N, graph_features)], -1))))
    assert out.shape == (b, p - window, N, hidden)
    for t in range(window, p):
        state = fused[:, t - window]
        for s in range(t - window + 1, t + 1):
            state = _dense_msg(block.message, _dense_correlation(block.correlation, fused[:, s], fused[:, s - 1]), state)
        torch.testing.assert_close(out[:, t - window], state)


def test_diig_outputs_one_prediction_per_full_window_and_learns(generator):
    """Logits for every t >= w; seeded initialisation is reproducible; a few Adam steps fit a
    tiny two-class problem (the gradient reaches every parameter)."""
    model = DIIG(classes=2, segments=4, window=2, features=8, hidden=8, dropout=0.0)
    model.reset_parameters(torch.Generator().manual_seed(1))
    again = DIIG(classes=2, segments=4, window=2, features=8, hidden=8, dropout=0.0)
    again.reset_parameters(torch.Generator().manual_seed(1))
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), again.parameters()))
    x = torch.randn(6, 4, 20, generator=generator)
    y = torch.tensor([0, 1] * 3)
    x[y == 1] += 1.0
    assert model(x).shape == (6, 2, 2) and model.case_probabilities(x).shape == (6, 2)
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(30):
        optimiser.zero_grad()
        loss = F.cross_entropy(model(x).reshape(-1, 2), y.repeat_interleave(2))
        loss.backward()
        optimiser.step()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
    assert (model.case_probabilities(x).argmax(-1) == y).all()
    assert repr(model).startswith("DIIG(classes=2, segments=4, window=2")


def test_feature_transform_cuts_segments_per_channel(generator):
    transform = FeatureTransform(segments=5, features=7)
    x = torch.randn(2, 3, 25, generator=generator)
    out = transform(x)
    assert out.shape == (2, 5, 3, 7)
    torch.testing.assert_close(out[1, 2, 0], transform(x[1:2, 0:1, 10:15].repeat(1, 1, 5))[0, 0, 0])  # segment 2 of channel 0 alone
    with pytest.raises(ValueError, match="segments"):
        transform(torch.randn(1, 3, 24))
    assert repr(transform) == "FeatureTransform(segments=5, features=7, conv_channels=16)"


def test_dropout_draws_from_its_own_generator_only():
    layer = GeneratorDropout(0.5).train()
    x = torch.ones(1000)
    assert torch.equal(layer(x), x)  # no generator: identity
    use_generator(layer, torch.Generator().manual_seed(3))
    first = layer(x)
    torch.manual_seed(123)  # the global generator does not matter
    use_generator(layer, torch.Generator().manual_seed(3))
    assert torch.equal(layer(x), first) and 300 < int((first == 0).sum()) < 700
    assert torch.equal(layer.eval()(x), x)


def test_vae_distribution_vector_is_the_mean_posterior_mean_and_estimates_are_bounded(generator):
    vae = DistributionVAE(12, 3)
    vae.reset_parameters(generator)
    x = torch.randn(9, 12, generator=generator)
    torch.testing.assert_close(vae.distribution_vector(x), vae.encode(x)[0].mean(0))  # eq. 17
    assert vae.loss(x, torch.Generator().manual_seed(0)).item() > 0
    estimator = DistributionEstimator(3)
    d_hat = estimator(torch.randn(50, 3, generator=generator) * 100)
    assert d_hat.abs().max() <= 1 and estimator.distance_bound == pytest.approx(2 * np.sqrt(3))
