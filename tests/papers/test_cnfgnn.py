"""CNFGNN as a protocol (in-process): the paper's model sizes and cost formula, mask equals
plain, what the server sees, DP accounting, a client dropping mid-round."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.models import GraphNet, GRUSeq2Seq
from secure_fedgraph.papers import CNFGNN
from secure_fedgraph.papers.cnfgnn import CNFGNNConfig, server_batches
from secure_fedgraph.privacy import GaussianRows, NoiseSource, rdp_epsilon
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.core.messages import UploadResponse, tensors_of
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig, Stage
from secure_fedgraph.runs.simulate import simulate
from tests.helpers import assert_no_readings, pooled_normalisation

TINY = dict(sensors=4, hidden_size=8, gn_hidden=16, gn_update=8, max_windows=30, batch_size=16, server_batch_size=12)


def _run(backend: Backend = Backend.PLAIN, **overrides):
    config = CNFGNNConfig(**{**TINY, "rounds": 2, **overrides})
    return simulate(CNFGNN(config), SecureSumConfig(backend=backend), record=True)


def _numbers(metrics) -> list[float]:
    return [v for r in metrics["rounds"] for v in (r["val_rmse"], r["val_mae"])] + [metrics["test_rmse"], metrics["test_mae"]]


def test_model_sizes_are_the_papers():
    """64K on the node (hidden 64, decoder from [h_c; h_G]) and about 1M in the server GN."""
    node = GRUSeq2Seq(hidden_size=64, graph_size=64)
    assert sum(p.numel() for p in node.parameters()) == 13_056 + 50_688 + 129
    assert sum(p.numel() for p in GraphNet().parameters()) == 1_237_312


def test_graph_net_uses_the_edges():
    """Cutting the only edge into node 1 changes node 1's embedding and nothing else's input."""
    torch.manual_seed(0)
    gn = GraphNet(8, 1, 16, 8, 8, 2)
    x = torch.randn(3, 5, 8)
    edges = torch.tensor([[0, 1, 2, 0], [0, 1, 2, 1]])
    with_edge = gn(x, edges, torch.ones(4))
    without = gn(x, edges[:, :3], torch.ones(3))
    assert with_edge.shape == (3, 5, 8)
    assert not torch.allclose(with_edge[1], without[1])


def test_server_batch_order_is_shared_and_covers_every_window():
    batches = server_batches(7, 1, 0, 100, 48, None)
    assert [len(b) for b in batches] == [48, 48, 4]
    assert sorted(np.concatenate(batches).tolist()) == list(range(100))
    assert all((a == b).all() for a, b in zip(batches, server_batches(7, 1, 0, 100, 48, None), strict=True))
    assert not (server_batches(7, 2, 0, 100, 48, None)[0] == batches[0]).all()


def test_mask_gives_the_plain_numbers_and_the_cost_of_eq_7():
    """Secure FedAvg (mask) equals plain FedAvg within the encoding error, and the elements
    moved per phase are the paper's Eq. 7: R x (n x |theta| x 2 + (1 + 2 R_s + 1) x n x S)."""
    plain, mask = _run(Backend.PLAIN), _run(Backend.MASK)
    assert _numbers(mask.metrics) == pytest.approx(_numbers(plain.metrics), rel=1e-4)
    assert plain.metrics["test_rmse"] > 0
    c = CNFGNNConfig(**{**TINY, "rounds": 2})
    n, rounds, windows = 4, 2, mask.metrics["windows"]["train"]
    theta = sum(p.numel() for p in GRUSeq2Seq(hidden_size=c.hidden_size, graph_size=c.hidden_size).parameters())
    state = windows * c.hidden_size  # hidden state size S: one h per training window
    elements = mask.metrics["elements_by_phase"]
    assert elements["fedavg"]["up"] + elements["fedavg"]["down"] == rounds * n * theta * 2
    split = elements["split learning"]
    assert split["up"] + split["down"] == rounds * (1 + 2 * c.server_rounds + 1) * n * state
    assert mask.metrics["bytes_up_by_phase"]["split learning"] >= 4 * split["up"]


def test_without_fedavg_the_cost_is_eq_10_and_no_weights_are_summed():
    result = _run(Backend.PLAIN, variant="at", server_rounds=2)
    assert "fedavg" not in result.metrics["elements_by_phase"]
    windows = result.metrics["windows"]["train"]
    split = result.metrics["elements_by_phase"]["split learning"]
    assert split["up"] + split["down"] == 2 * (1 + 2 * 2 + 1) * 4 * windows * 8


@pytest.mark.parametrize("variant", ["at+fedavg", "sl+fedavg"])
def test_the_server_never_receives_raw_data_targets_or_weights(variant):
    """Everything the server received, decoded: hidden states, their gradients, masked sums
    and released error totals; no tensor equals (or contains) a client's speeds or weights."""
    result = _run(Backend.MASK, variant=variant)
    uploads = {}
    for stage, _, data in result.received:
        message = codec.decode(data)
        if isinstance(message, UploadResponse):
            uploads.setdefault(message.name, []).append(tensors_of(message.tensors))
        if stage is Stage.INPUT:
            assert not isinstance(message, UploadResponse)
    per_round = "h_c:train" if variant.startswith("at") else "h_c"  # AT: all windows once a round; SL: per batch
    assert set(uploads) == {"window_counts", per_round, "h_c:val", "h_c:test", "dL/dh_G"}  # mask: the server holds the error sums
    speeds = [h.context.data.x["train"][..., 0] for h in result.hosts.values()]
    for name, answers in uploads.items():
        for tensors in answers:
            assert_no_readings(name, tensors, speeds)


def test_the_server_sees_weights_only_masked():
    """The FedAvg inputs the server receives: with plain, float weights (documented as
    revealing); with mask, ring elements spread uniformly over the ring (no weight readable)."""
    theta = sum(p.numel() for p in GRUSeq2Seq(hidden_size=8, graph_size=8).parameters())

    def weight_inputs(result):
        inputs = [codec.decode(d).payload for s, _, d in result.received if s is Stage.INPUT]
        return [p for p in inputs if p is not None and p.size >= theta]

    plain, mask = weight_inputs(_run(Backend.PLAIN)), weight_inputs(_run(Backend.MASK))
    assert len(plain) == len(mask) == 2 * 4
    assert all(p.dtype.kind == "f" and np.abs(p).max() < 8 for p in plain)
    for payload in mask:
        assert payload.dtype.kind == "u"
        uniform = payload.astype(np.float64) / 2.0 ** (8 * payload.dtype.itemsize)
        assert abs(uniform.mean() - 0.5) < 0.05 and abs(uniform.std() - 12**-0.5) < 0.05


def test_dp_noise_is_applied_before_upload_and_accounted():
    sigma, clip = 1.0, 0.5
    plain = _run(Backend.PLAIN)
    noisy = _run(Backend.PLAIN, dp_sigma=sigma, dp_clip=clip)
    privacy = noisy.metrics["privacy"]
    assert privacy["epsilon_max"] == pytest.approx(rdp_epsilon([(sigma, 1.0, 2)], 1e-5))
    assert 0.8 * privacy["epsilon_max"] <= privacy["accountants"]["prv"]["epsilon_max"] <= privacy["epsilon_max"]
    assert set(privacy["releases_per_client"].values()) == {2}
    assert noisy.metrics["test_rmse"] != plain.metrics["test_rmse"]
    uploads = [tensors_of(codec.decode(d).tensors)["h"] for s, _, d in noisy.received
               if s is Stage.UPLOAD and codec.decode(d).name == "h_c:train"]
    # each row clipped to L2 norm 0.5, then noised with std 0.5 per element: the mean square of the
    # uploads is the noise's variance plus at most clip^2 / width from the rows themselves (the
    # noise is fresh OS randomness each run, so the bounds allow 6 standard errors of the estimate)
    values = np.concatenate(uploads).astype(np.float64)
    noise, rows = (sigma * clip) ** 2, clip**2 / values.shape[-1]
    slack = 6 * np.sqrt(2 / values.size) * (noise + rows)
    assert noise - slack <= np.mean(values**2) <= noise + rows + slack
    assert "privacy" not in plain.metrics
    split = _run(Backend.PLAIN, variant="sl", dp_sigma=sigma, dp_clip=clip).metrics["privacy"]  # every window once per round
    assert set(split["releases_per_client"].values()) == {2} and split["epsilon_max"] == privacy["epsilon_max"]
    again = _run(Backend.PLAIN, dp_sigma=sigma, dp_clip=clip)  # same run seed: the noise must not follow from it
    first_upload = lambda r: next(tensors_of(codec.decode(d).tensors)["h"] for s, _, d in r.received  # noqa: E731
                                  if s is Stage.UPLOAD and codec.decode(d).name == "h_c:train")
    assert not np.allclose(first_upload(noisy), first_upload(again))


@pytest.mark.parametrize("unit, stride, releases", [("window", 1, 2), ("reading", 1, 2 * 12), ("reading", 12, 2), ("sensor", 1, None)])
def test_the_privacy_unit_is_selectable_and_the_plan_predicts_what_the_collectives_count(unit, stride, releases):
    """DP-UNIT: a reading sits in up to 12 windows' inputs and pays for each (disjoint windows,
    stride 12: one); a sensor pays for every row it uploaded. The accountant's K (fed by the
    upload collective) is what the plan planned, so --target-epsilon calibrates the real run."""
    plan = CNFGNN(CNFGNNConfig(**{**TINY, "rounds": 2, "dp_sigma": 2.0, "dp_unit": unit, "window_stride": stride}))
    privacy = simulate(plan, SecureSumConfig(backend=Backend.PLAIN)).metrics["privacy"]
    counted = set(privacy["releases_per_client"].values())
    windows = {len(plan.load_client_data(0, None).y[s]) for s in ("train", "val", "test")}
    if releases is None:  # every training and validation window twice, every test window once
        releases = 2 * 30 + 2 * 30 + 30 if windows == {30} else None
    assert counted == {releases} and plan.planned_releases(None) == releases
    assert privacy["epsilon_max"] == pytest.approx(rdp_epsilon([(2.0, 1.0, releases)], 1e-5))
    assert privacy["unit"] == plan.privacy_unit().description and unit in privacy["unit"] or unit == "window"


def test_a_target_epsilon_calibrates_the_noise_for_the_unit():
    plan = CNFGNN(CNFGNNConfig(**{**TINY, "rounds": 2, "dp_unit": "reading"})).calibrated(3.0)
    assert 3.0 - 0.01 <= rdp_epsilon([(plan.config.dp_sigma, 1.0, 24)], 1e-5) <= 3.0
    with pytest.raises(ConfigError, match="calibrates dp_sigma alone: leave out dp_sigma and dpsgd_sigma"):
        plan.calibrated(3.0)


def test_dpsgd_in_client_update_composes_with_the_upload_noise_per_window():
    """AT + FedAvg with both mechanisms: a window's epsilon composes its 2 uploads (sigma 1,
    rate 1) with the client's DP-SGD steps (30 training windows, expected batch 16: q = 0.53,
    2 steps a round). Split learning's batches are the server's, so DP-SGD refuses it."""
    result = _run(Backend.PLAIN, dp_sigma=1.0, dpsgd_sigma=1.2, dpsgd_clip=0.5)
    privacy = result.metrics["privacy"]
    assert privacy["dpsgd_steps_per_client"] == {str(c): 4 for c in range(4)}
    assert privacy["epsilon_max"] == pytest.approx(rdp_epsilon([(1.0, 1.0, 2), (1.2, 16 / 30, 4)], 1e-5))
    assert "DP-SGD" in privacy["mechanism"] and "Gaussian on uploaded h_c rows" in privacy["mechanism"]
    assert "12 target steps" in privacy["unit"]
    with pytest.raises(ConfigError, match="variant 'sl' trains on the server's batches"):
        CNFGNNConfig(**{**TINY, "variant": "sl", "dpsgd_sigma": 1.0})
    with pytest.raises(ConfigError, match="DP-SGD is accounted per training window"):
        CNFGNNConfig(**{**TINY, "dp_unit": "reading", "dpsgd_sigma": 1.0})
    calibrated = CNFGNN(CNFGNNConfig(**{**TINY, "rounds": 2})).calibrated(4.0, option="dpsgd_sigma").config
    assert calibrated.dp_sigma == 0 and 4.0 - 0.01 <= rdp_epsilon([(calibrated.dpsgd_sigma, 16 / 30, 4)], 1e-5) <= 4.0


def test_gaussian_rows_clips_and_noises_each_row():
    rows = np.full((4000, 16), 3.0, dtype=np.float32)
    hook = GaussianRows(clip=1.0, sigma=0.0)
    out = hook({"h": rows})["h"]
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5) and hook.clipped_rows == 4000
    noisy = GaussianRows(clip=1.0, sigma=2.0, noise=NoiseSource.reproducible(b"k"))({"h": rows})["h"]
    noise = (noisy - out).ravel()
    assert noise.std() == pytest.approx(2.0, rel=0.03) and abs(noise.mean()) < 0.05
    assert not np.allclose(GaussianRows(1.0, 2.0)({"h": rows})["h"], noisy)  # fresh key per release by default


def test_a_sensor_client_dropping_mid_round_does_not_stop_the_run():
    result = simulate(CNFGNN(CNFGNNConfig(**{**TINY, "rounds": 2})), SecureSumConfig(backend=Backend.MASK),
                      drop={Stage.SCATTER: [2]})
    assert 2 in result.dropped
    assert result.metrics["rounds"][-1]["clients"] == 3 and result.metrics["test_rmse"] > 0


@pytest.mark.parametrize("variant", ["sl", "sl+fedavg"])
def test_split_learning_costs_eq_8_and_eq_9(variant):
    """SL moves h_c up, h_G down, dL/dh_G up and dL/dh_c down for every window once per round:
    Eq. 8, R x 2 x 2 x n x S; SL + FedAvg adds n x |theta| x 2 per round (Eq. 9)."""
    result = _run(Backend.MASK, variant=variant)
    windows, elements = result.metrics["windows"]["train"], result.metrics["elements_by_phase"]
    assert elements["split learning"]["up"] == elements["split learning"]["down"] == 2 * 2 * 4 * windows * 8
    theta = sum(p.numel() for p in GRUSeq2Seq(hidden_size=8, graph_size=8).parameters())
    assert elements.get("fedavg", {"up": 0, "down": 0}) == ({"up": 2 * 4 * theta, "down": 2 * 4 * theta} if variant == "sl+fedavg" else {"up": 0, "down": 0})
    assert result.metrics["test_rmse"] > 0


def _centralised_split_learning(plan: CNFGNN, cross_terms: bool = True) -> float:
    """The SL variant's first round computed in one place with autograd: every client's model,
    the GN, the loss sum_i L_i, one Adam per client and one for the GN (on the mean). Returns
    the validation RMSE. ``cross_terms=False`` drops the gradient through the GN to the encoders."""
    from secure_fedgraph.training.device import single_thread
    from secure_fedgraph.training.forecasting import error_sums, load_weights, weights_of
    from secure_fedgraph.training.metrics import rmse_mae

    c = plan.config
    raws = [plan.load_client_data(i, None) for i in plan.client_ids()]
    mean, std = pooled_normalisation(raws)
    data = [raw.normalised(mean, std) for raw in raws]
    graph = plan.load_server_data(None)
    with single_thread():
        gn = plan.graph_net()
    initial = weights_of(plan.client_model())
    models = []
    for _ in raws:
        model = GRUSeq2Seq(hidden_size=c.hidden_size, graph_size=c.hidden_size)
        load_weights(model, initial)
        models.append(model)
    optimisers = [torch.optim.Adam(m.parameters(), lr=c.lr) for m in models]
    server_optimiser = torch.optim.Adam(gn.parameters(), lr=c.server_lr)
    train = [d.sensor("train", 0) for d in data]
    with single_thread():
        for batch in server_batches(plan.seed, 0, 0, len(train[0][0]), c.server_batch_size, c.max_server_batches):
            hidden = [m.encode(torch.as_tensor(x[batch])) for m, (x, _, _) in zip(models, train, strict=True)]
            uploaded = torch.stack(hidden if cross_terms else [h.detach() for h in hidden])
            h_graph = gn(uploaded, graph.edge_index, graph.edge_weight)
            losses = [torch.nn.functional.mse_loss(m.decode(h, torch.as_tensor(x[batch]), torch.as_tensor(t[batch]), graph=h_graph[i]),
                                                   torch.as_tensor(y[batch]))
                      for i, (m, h, (x, y, t)) in enumerate(zip(models, hidden, train, strict=True))]
            for o in [*optimisers, server_optimiser]:
                o.zero_grad()
            sum(losses).backward()
            for p in gn.parameters():
                if p.grad is not None:  # the last layer's global update does not reach h_G
                    p.grad /= len(models)
            for o in [*optimisers, server_optimiser]:
                o.step()
        val = [d.sensor("val", 0) for d in data]
        with torch.no_grad():
            h_graph = gn(torch.stack([m.encode(torch.as_tensor(x)) for m, (x, _, _) in zip(models, val, strict=True)]), graph.edge_index, graph.edge_weight)
    totals = [error_sums(m, *v, mean=mean, std=std, graph=h_graph[i].numpy()) for i, (m, v) in enumerate(zip(models, val, strict=True))]
    return rmse_mae({k: sum(t[k] for t in totals) for k in totals[0]})[0]


def test_split_learning_is_exact_backpropagation_through_the_server():
    """The SL protocol (h_c up, h_G down, dL/dh_G up, dL/dh_c down) trains exactly what autograd
    through one centralised graph of all client models and the GN trains; dropping the gradient
    that flows back through the GN gives a measurably different model."""
    config = CNFGNNConfig(**{**TINY, "rounds": 1, "variant": "sl", "lr": 0.02, "server_lr": 0.02, "cl_decay_steps": 0})
    protocol = simulate(CNFGNN(config), SecureSumConfig(backend=Backend.PLAIN)).metrics["rounds"][0]["val_rmse"]
    exact, detached = _centralised_split_learning(CNFGNN(config)), _centralised_split_learning(CNFGNN(config), cross_terms=False)
    assert protocol == pytest.approx(exact, rel=1e-5)
    assert abs(detached - exact) > 100 * abs(protocol - exact) + 3e-4


def test_each_table_10_variant_is_its_own_plan_class():
    """CNFGNN(config) builds the variant's class, so the registry, the command line and
    from_config_json need nothing special; a class cannot run another variant's config."""
    from secure_fedgraph.papers.cnfgnn import AlternatingTraining, AlternatingTrainingFedAvg, SplitLearning, SplitLearningFedAvg

    classes = {"at+fedavg": AlternatingTrainingFedAvg, "at": AlternatingTraining, "sl": SplitLearning, "sl+fedavg": SplitLearningFedAvg}
    for variant, cls in classes.items():
        plan = CNFGNN(CNFGNNConfig(variant=variant))
        assert type(plan) is cls and plan.name == "cnfgnn"
        assert type(CNFGNN.from_config_json(plan.config_json())) is cls
    assert type(CNFGNN()) is AlternatingTrainingFedAvg  # the paper's default
    with pytest.raises(ConfigError, match="variant 'sl'"):
        SplitLearning(CNFGNNConfig(variant="at"))
