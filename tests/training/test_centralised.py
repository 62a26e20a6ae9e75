"""Centralised baselines of CNFGNN's Table 7 (GRU, GRU + GN) on the packaged METR-LA week:
the paper's model sizes, the graph is really used, training lowers the loss, evaluation is the
pooled unmasked RMSE/MAE, best-epoch testing, determinism, configuration errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from secure_fedgraph.data import dcrnn_windows
from secure_fedgraph.errors import ConfigError
from secure_fedgraph.models import GraphGRU, GraphNet, GRUSeq2Seq, PooledGRU
from secure_fedgraph.models.graph_net import sensor_graph
from secure_fedgraph.data.metr_la import load_cached
from secure_fedgraph.training.centralised import (
    GRU,
    GRU_GN,
    CentralisedConfig,
    build_gru,
    build_gru_gn,
    error_sums_of,
    load_pooled,
    train_centralised_gru,
    train_centralised_gru_gn,
)
from secure_fedgraph.training.device import resolve_device
from secure_fedgraph.training.metrics import rmse_mae

TINY = {"sensors": 5, "max_windows": 40, "gru_hidden_size": 8, "hidden_size": 8, "gn_hidden": 16, "gn_update": 8, "batch_size": 8, "device": "cpu"}
TRAIN = {GRU: train_centralised_gru, GRU_GN: train_centralised_gru_gn}


def _numbers(result) -> list[float]:
    return [v for r in result.history for v in (r.train_loss, r.val_rmse, r.val_mae)] + [result.test_rmse, result.test_mae,
                                                                                          result.best_test_rmse, result.best_test_mae]


def _tiny_graph_gru(edges: list[tuple[int, int]], *, nodes: int = 3, layers: int = 2, seed: int = 0) -> GraphGRU:
    edge_index = torch.tensor(edges, dtype=torch.long).t().reshape(2, -1)
    config = CentralisedConfig(**{**TINY, "gn_layers": layers, "seed": seed})
    return build_gru_gn(config, edge_index, torch.ones(edge_index.shape[1]), nodes)


def _inputs(windows: int, nodes: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(windows, 12, nodes, 2, generator=g), torch.rand(windows, 12, nodes, generator=g)


def test_model_sizes_are_the_papers():
    """GRU 63K: hidden 100 gives 62,501; GRU + GN: 63,873 on the node (decoder from [h_c; h_G])
    and 1,237,312 in the Graph Network (PyTorch counts; nothing is trained at full size)."""
    config = CentralisedConfig()
    assert sum(p.numel() for p in build_gru(config).parameters()) == 62_501
    edge_index, edge_weight = sensor_graph(load_cached(None).adjacency)
    model = build_gru_gn(config, edge_index, edge_weight, 207)
    assert sum(p.numel() for p in model.node.parameters()) == 13_056 + 50_688 + 129 == 63_873
    assert sum(p.numel() for p in model.graph_net.parameters()) == 1_237_312
    assert not model.state_dict().keys() & {"edge_index", "edge_weight"}  # the graph is data, not weights


def test_sensor_graph_is_cnfgnns_dense_to_sparse():
    """Every nonzero entry is an edge sender -> receiver weighted by it, self-loops kept, in the
    order cnfgnn.py's load_server_data builds them."""
    adjacency = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.25, 0.0, 1.0]], dtype=np.float32)
    edge_index, edge_weight = sensor_graph(adjacency)
    assert edge_index.tolist() == [[0, 0, 1, 2, 2], [0, 1, 1, 0, 2]]
    assert edge_weight.tolist() == [1.0, 0.5, 1.0, 0.25, 1.0]
    assert edge_index.dtype == torch.int64 and edge_weight.dtype == torch.float32
    full_index, _ = sensor_graph(load_cached(None).adjacency)
    assert full_index.shape == (2, 1722) and (full_index[0] == full_index[1]).sum() == 207
    with pytest.raises(ValueError, match="square"):
        sensor_graph(np.ones((2, 3)))


def test_pooled_gru_treats_each_sensor_alone():
    """Baseline (a) is the shared GRUSeq2Seq applied to each (window, sensor) sequence: the
    layout round-trips, and changing one sensor's inputs changes no other sensor's forecast."""
    model = build_gru(CentralisedConfig(**TINY)).eval()
    x, tod = _inputs(6, 4)
    with torch.no_grad():
        out = model(x, tod)
        assert out.shape == (6, 12, 4)
        for i in range(4):
            torch.testing.assert_close(out[:, :, i], model.node(x[:, :, i], tod[:, :, i]), rtol=1e-5, atol=1e-6)
        changed = x.clone()
        changed[:, :, 0, 0] += 1.0
        other = model(changed, tod)
    assert not torch.allclose(other[:, :, 0], out[:, :, 0])
    torch.testing.assert_close(other[:, :, 1:], out[:, :, 1:], rtol=1e-5, atol=1e-6)


def test_graph_gru_uses_the_graph():
    """Baseline (b): gradients reach every Graph Network parameter but the last layer's global
    update (whose output nothing reads, in CNFGNN too); sensor 1's forecast depends
    on sensor 0's inputs; the edge 0 -> 1 matters. With one GN layer sensor 1 sees sensor 0 only
    through that edge (with two, the global state also carries it, so cutting the edge changes
    sensor 1's forecast without making it independent)."""
    loops = [(0, 0), (1, 1), (2, 2)]
    model = _tiny_graph_gru(loops + [(0, 1)])
    x, tod = _inputs(5, 3)
    y = torch.randn(5, 12, 3, generator=torch.Generator().manual_seed(1))
    nn.functional.mse_loss(model(x, tod, targets=y, teacher_forcing=0.5, generator=torch.Generator().manual_seed(2)), y).backward()
    dead = {name for name, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0}
    assert dead and all(name.startswith("graph_net.") and "global" in name for name in dead), dead  # the last global update feeds nothing
    assert sum(p.numel() for name, p in model.graph_net.named_parameters() if "graph_net." + name not in dead) > 0
    changed = x.clone()
    changed[:, :, 0, 0] += 1.0
    model.eval()
    with torch.no_grad():
        base, moved = model(x, tod), model(changed, tod)
        assert not torch.allclose(base[:, :, 1], moved[:, :, 1])
        cut = _tiny_graph_gru(loops).eval()
        cut.load_state_dict(model.state_dict())
        assert not torch.allclose(cut(x, tod)[:, :, 1], base[:, :, 1])

        one_layer = _tiny_graph_gru(loops + [(0, 1)], layers=1).eval()
        assert not torch.allclose(one_layer(changed, tod)[:, :, 1], one_layer(x, tod)[:, :, 1])
        one_layer_cut = _tiny_graph_gru(loops, layers=1).eval()
        one_layer_cut.load_state_dict(one_layer.state_dict())
        torch.testing.assert_close(one_layer_cut(changed, tod)[:, :, 1], one_layer_cut(x, tod)[:, :, 1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("baseline", [GRU, GRU_GN])
def test_training_lowers_the_training_loss(baseline):
    result = TRAIN[baseline](CentralisedConfig(**TINY, epochs=3))
    losses = [r.train_loss for r in result.history]
    assert result.epochs == 3 and all(r.steps == 5 for r in result.history)  # 40 windows, 8 a batch
    assert losses[-1] < losses[0]
    assert all(math.isfinite(v) for v in _numbers(result))


@pytest.mark.parametrize("baseline", [GRU, GRU_GN])
def test_same_seed_same_numbers(baseline):
    config = CentralisedConfig(**TINY, epochs=2)
    first, second = TRAIN[baseline](config), TRAIN[baseline](config)
    assert _numbers(first) == _numbers(second)
    other = TRAIN[baseline](CentralisedConfig(**TINY, epochs=2, seed=1))
    assert _numbers(other) != _numbers(first)


def test_training_leaves_the_global_rng_alone():
    state = torch.get_rng_state()
    train_centralised_gru_gn(CentralisedConfig(**TINY, epochs=1))
    assert torch.equal(torch.get_rng_state(), state)


def test_normalisation_is_the_pooled_training_statistics():
    config = CentralisedConfig(**TINY)
    data = load_pooled(config)
    speeds = dcrnn_windows(load_cached(None).speed[:, :5], max_windows=40).x["train"][..., 0].astype(np.float64)
    assert data.mean == pytest.approx(speeds.mean(), rel=1e-12)
    assert data.std == pytest.approx(speeds.std(), rel=1e-9)
    assert data.sensors == 5 and data.adjacency.shape == (5, 5)
    assert [data.windows(s) for s in ("train", "val", "test")] == [40, 40, 40]


@pytest.mark.parametrize("baseline", [GRU, GRU_GN])
def test_evaluation_is_the_pooled_unmasked_error_in_mph(baseline):
    """The reported test RMSE/MAE equal a direct computation from the final model's forecasts:
    every sensor, window and horizon step pooled, errors in mph, nothing masked."""
    config = CentralisedConfig(**TINY, epochs=1)
    result = TRAIN[baseline](config)
    data = load_pooled(config)
    x, y, tod = (torch.as_tensor(a["test"]) for a in (data.splits.x, data.splits.y, data.splits.y_tod))
    model = result.model.eval()
    with torch.no_grad():
        if baseline == GRU:
            forecast = torch.stack([model.node(x[:, :, i], tod[:, :, i]) for i in range(5)], dim=2)
        else:
            h = torch.stack([model.node.encode(x[:, :, i]) for i in range(5)])  # (N, S, H)
            h_graph = model.graph_net(h, *sensor_graph(data.adjacency))
            forecast = torch.stack([model.node.decode(h[i], x[:, :, i], tod[:, :, i], graph=h_graph[i]) for i in range(5)], dim=2)
    error_mph = (forecast.numpy().astype(np.float64) - y.numpy().astype(np.float64)) * data.std
    assert error_mph.shape == (40, 12, 5)
    assert result.test_rmse == pytest.approx(np.sqrt(np.mean(error_mph**2)), rel=1e-5)
    assert result.test_mae == pytest.approx(np.mean(np.abs(error_mph)), rel=1e-5)
    assert result.best_epoch == 1 and (result.best_test_rmse, result.best_test_mae) == (result.test_rmse, result.test_mae)


def test_error_sums_match_forecasting_layout():
    prediction, target = torch.tensor([[0.0, 1.0], [2.0, -1.0]]), torch.tensor([[0.5, 1.0], [1.0, 1.0]])
    sums = error_sums_of(prediction, target, std=2.0)
    assert sums["sse"][0] == pytest.approx(4 * (0.25 + 0 + 1 + 4)) and sums["sae"][0] == pytest.approx(2 * 3.5) and sums["count"][0] == 4
    assert rmse_mae(sums) == pytest.approx((math.sqrt(21 / 4), 7 / 4))
    with pytest.raises(ValueError, match="shape"):
        error_sums_of(prediction, target[:1], std=1.0)


def test_best_epoch_is_tested_from_its_own_weights():
    """With patience 1 the run stops one epoch after its best; the test numbers it reports for
    the best epoch equal those of a run (same seed) that simply ends at that epoch."""
    config = CentralisedConfig(**{**TINY, "epochs": 6, "patience": 1, "lr": 0.05})
    result = train_centralised_gru_gn(config)
    vals = [r.val_rmse for r in result.history]
    assert result.epochs < 6, "the pinned run was expected to stop early; pick another lr if the models changed"
    assert result.best_epoch == result.epochs - 1 == 1 + int(np.argmin(vals))
    assert result.best_val_rmse == min(vals)
    assert (result.best_test_rmse, result.best_test_mae) != (result.test_rmse, result.test_mae)
    shorter = train_centralised_gru_gn(CentralisedConfig(**{**TINY, "epochs": result.best_epoch, "lr": 0.05}))
    assert (shorter.test_rmse, shorter.test_mae) == (result.best_test_rmse, result.best_test_mae)


def test_progress_lines_and_caps():
    lines: list[str] = []
    result = train_centralised_gru(CentralisedConfig(**TINY, epochs=2, max_steps_per_epoch=2), say=lines.append)
    assert len(lines) == 2 and lines[0].startswith("GRU epoch 1/2: train loss ") and "val RMSE" in lines[1] and "(2 steps)" in lines[1]
    assert [r.steps for r in result.history] == [2, 2]
    assert result.windows == (40, 40, 40) and result.sensors == 5 and result.graph_parameters == 0
    metrics = result.metrics()
    assert metrics["epochs"] == 2 and metrics["windows"] == {"train": 40, "val": 40, "test": 40} and "model" not in metrics


def test_batch_sizes_default_to_cnfgnns():
    config = CentralisedConfig()
    assert (config.batch_windows(GRU), config.batch_windows(GRU_GN)) == (256, 64)
    assert CentralisedConfig(batch_size=48).batch_windows(GRU_GN) == 48


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"epochs": 0}, "epochs must be an int >= 1"),
        ({"sensors": 1}, "sensors must be an int in"),
        ({"sensors": 208}, "sensors must be an int in"),
        ({"batch_size": 0}, "batch_size must be an int >= 1"),
        ({"hidden_size": 2.5}, "hidden_size must be an int"),
        ({"lr": 0.0}, "lr must be a finite number > 0"),
        ({"lr": float("nan")}, "lr must be a finite number > 0"),
        ({"lr": True}, "lr must be a finite number > 0"),
        ({"cl_decay_steps": -1}, "cl_decay_steps must be an int >= 0"),
        ({"max_windows": 0}, "max_windows must be an int >= 1"),
        ({"max_steps_per_epoch": 0}, "max_steps_per_epoch must be an int >= 1"),
        ({"patience": 0}, "patience must be an int >= 1"),
        ({"seed": "1"}, "seed must be an int"),
        ({"device": "tpu"}, "device must be one of"),
    ],
)
def test_bad_config_raises(overrides, message):
    with pytest.raises(ConfigError, match=message):
        CentralisedConfig(**overrides)


def test_devices():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="cuda"):
            resolve_device("cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_gives_the_cpu_numbers_closely():
    cpu = train_centralised_gru_gn(CentralisedConfig(**TINY, epochs=1))
    cuda = train_centralised_gru_gn(CentralisedConfig(**{**TINY, "device": "cuda"}, epochs=1))
    assert cuda.device.startswith("cuda")
    assert cuda.test_rmse == pytest.approx(cpu.test_rmse, rel=1e-3)


def test_graph_net_reset_is_seeded_and_complete():
    a, b, c = GraphNet(8, 1, 16, 8, 8, 2), GraphNet(8, 1, 16, 8, 8, 2), GraphNet(8, 1, 16, 8, 8, 2)
    a.reset_parameters(torch.Generator().manual_seed(3))
    b.reset_parameters(torch.Generator().manual_seed(3))
    c.reset_parameters(torch.Generator().manual_seed(4))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert all(not torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters(), strict=True))  # every parameter is drawn
    for layer in (m for m in a.modules() if isinstance(m, nn.Linear)):
        assert layer.weight.abs().max() <= layer.in_features**-0.5


def test_forecasters_check_their_inputs():
    with pytest.raises(ValueError, match="without graph input"):
        PooledGRU(GRUSeq2Seq(hidden_size=4, graph_size=4))
    model = _tiny_graph_gru([(0, 1)])
    x, tod = _inputs(2, 4)
    with pytest.raises(ValueError, match="3 sensors"):
        model(x, tod)
    with pytest.raises(ValueError, match="outside"):
        GraphGRU(GRUSeq2Seq(hidden_size=4, graph_size=4), GraphNet(4, 1, 8, 4, 4, 1), torch.tensor([[0], [5]]), torch.ones(1), 3)
