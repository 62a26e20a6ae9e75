"""FedSTGD: Theorem 1, the decomposition of eq. 21, exact gradients through the sums, and the
plan (mask equals plain, cost counts, ablations, the centralised run)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.models.fedstgd import FedSTGDModel, ModelShape, aggregate, contribution, direct_graph_term, gamma
from secure_fedgraph.papers.fedstgd import FedSTGD, FedSTGDConfig, FedSTGDSums, batch_order, initial_weights
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig
from secure_fedgraph.protocol.sum_backends.messages import InputResponse
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.runs.simulate import simulate, simulate_one_party
from secure_fedgraph.training.sum_tape import SumTape
from tests.helpers import HZMETRO_DIR, needs_hzmetro

TINY = dict(hidden=8, node_dim=8, time_dim=8, embed_rank=2, max_windows=16, batch_size=8, eval_batch_size=16)


def _softmax_rows(*shape, generator):
    return torch.softmax(torch.randn(*shape, generator=generator, dtype=torch.float64), dim=-1)


def test_theorem_1_gamma_products_equal_the_hadamard_form():
    g = torch.Generator().manual_seed(0)
    batch, n_i, n_j, d, d_e = 3, 5, 7, 4, 6
    f_i, f_j = torch.randn(batch, n_i, d, generator=g, dtype=torch.float64), torch.randn(batch, n_j, d, generator=g, dtype=torch.float64)
    e_i, e_j = torch.randn(n_i, d_e, generator=g, dtype=torch.float64), torch.randn(n_j, d_e, generator=g, dtype=torch.float64)
    hadamard = (f_i @ f_j.transpose(1, 2)) * (e_i @ e_j.T)
    products = gamma(f_i, e_i) @ gamma(f_j, e_j).transpose(1, 2)
    torch.testing.assert_close(products, hadamard, rtol=1e-12, atol=1e-12)
    # the columns are w_k ⊙ v_l in lexicographic (k, l) order, as the theorem defines Γ
    assert gamma(f_i, e_i).shape == (batch, n_i, d * d_e)
    torch.testing.assert_close(gamma(f_i, e_i)[..., 2 * d_e + 5], f_i[..., 2] * e_i[:, 5])


def test_the_decomposed_graph_term_equals_eq_21_computed_on_pooled_data():
    """Each client's P/Q contributions, summed, give exactly its rows of eq. 21 computed with the
    full N x N matrix over all clients' stations (steps 1-3 of eqs. 22 and 23)."""
    g = torch.Generator().manual_seed(1)
    sizes, batch, width = (3, 5, 4), 2, 6
    mlps = [_softmax_rows(batch, n, 4, generator=g) for n in sizes]
    embeddings = [_softmax_rows(n, 4, generator=g) for n in sizes]
    inputs = [torch.randn(batch, n, width, generator=g, dtype=torch.float64) for n in sizes]
    eta = torch.randn(batch, generator=g, dtype=torch.float64)
    gammas = [gamma(m, e) for m, e in zip(mlps, embeddings)]
    parts = [contribution(m, gm, x) for m, gm, x in zip(mlps, gammas, inputs)]
    sums = {k: sum(p[k] for p in parts) for k in ("P", "Q")}
    direct = direct_graph_term(torch.cat(mlps, 1), torch.cat(embeddings, 0), eta, torch.cat(inputs, 1))
    rows = np.cumsum((0,) + sizes)
    for i in range(len(sizes)):
        decomposed = aggregate(mlps[i], gammas[i], eta, sums, sum(sizes))
        torch.testing.assert_close(decomposed, direct[:, rows[i] : rows[i + 1]], rtol=1e-12, atol=1e-12)
    assert sums["P"].shape == (batch, 4, width) and sums["Q"].shape == (batch, 16, width)  # independent of N


def _clients(shape: ModelShape, sizes, seed: int = 0):
    models = []
    for i, n in enumerate(sizes):
        model = FedSTGDModel(shape, n, sum(sizes))
        model.reset_parameters(torch.Generator().manual_seed(seed))
        model.reset_private(torch.Generator().manual_seed(100 + i))
        models.append(model)
    return models


def _ask(tensors):
    """What a tape yields to have ``tensors`` summed (a plan yields a Contribute need instead)."""
    return tensors


def _lockstep(steps):
    """Drive several clients' tape generators, every sum over all of them (numpy, as a secure sum)."""
    values, results = [next(s) for s in steps], [None] * len(steps)
    while True:
        total = SimpleNamespace(values={k: sum(v[k] for v in values) for k in values[0]})
        values = []
        for i, s in enumerate(steps):
            try:
                values.append(s.send(total))
            except StopIteration as stop:
                results[i] = stop.value
        if len(values) < len(steps):
            return results


@pytest.fixture(scope="module")
def batch():
    g = torch.Generator().manual_seed(2)
    sizes, b = (3, 5, 4), 2
    x, y = torch.randn(b, 4, sum(sizes), 2, generator=g), torch.randn(b, 4, sum(sizes), 2, generator=g)
    slots = torch.randint(0, 73, (b, 8), generator=g)
    cuts = np.cumsum((0,) + sizes)
    split = lambda t: [t[:, :, cuts[i] : cuts[i + 1]] for i in range(len(sizes))]  # noqa: E731
    return sizes, split(x), split(y), slots


def _loss(prediction, target, n_total):
    return (prediction - target).abs().sum() / (target.shape[0] * target.shape[1] * n_total * target.shape[3])


def _tape_gradients(models, xs, ys, slots, *, exact: bool):
    shape = models[0].shape
    tapes = [SumTape() for _ in models]
    constants = [m.batch_constants(slots) for m in models]
    forward = [t.forward(lambda i, s, S, m=m, x=x, c=c: m.segment(i, s, S, x, c), shape.n_sums, summed_by=_ask)
               for t, m, x, c in zip(tapes, models, xs, constants)]
    predictions = _lockstep(forward)
    losses = [_loss(p, y, models[0].n_total) for p, y in zip(predictions, ys)]
    if exact:
        _lockstep([t.backward(loss, summed_by=_ask) for t, loss in zip(tapes, losses)])
    else:
        for t, loss in zip(tapes, losses):
            assert next(t.backward(loss, exact=False, summed_by=_ask), None) is None  # no gradient sum at all
    return sum(float(loss.detach()) for loss in losses), [{n: p.grad.clone() for n, p in m.named_parameters()} for m in models]


def test_exact_gradients_through_the_sums_equal_autograd_through_the_centralised_model(batch):
    """Every client's gradient from the tape (its own backward plus the summed dL/dS of all
    clients, one sum per forward sum) equals autograd of sum_i L_i through one graph holding
    every client and torch sums; the detached variant (no gradient sums) does not."""
    sizes, xs, ys, slots = batch
    shape = ModelShape(hidden=6, node_dim=5, time_dim=4, embed_rank=3)
    reference = _clients(shape, sizes)
    constants = [m.batch_constants(slots) for m in reference]
    states, summed = [{} for _ in reference], None
    for index in range(shape.n_sums + 1):
        outs = [m.segment(index, st, summed, x, c) for m, st, x, c in zip(reference, states, xs, constants)]
        states = [o[0] for o in outs]
        if index < shape.n_sums:
            summed = {k: sum(o[1][k] for o in outs) for k in ("P", "Q")}
    total = sum(_loss(s["prediction"], y, sum(sizes)) for s, y in zip(states, ys))
    total.backward()

    loss, exact = _tape_gradients(_clients(shape, sizes), xs, ys, slots, exact=True)
    assert loss == pytest.approx(float(total), rel=1e-6)
    for model, grads in zip(reference, exact):
        for name, p in model.named_parameters():
            torch.testing.assert_close(grads[name], p.grad, rtol=1e-4, atol=1e-7, msg=name)
    _, detached = _tape_gradients(_clients(shape, sizes), xs, ys, slots, exact=False)
    gap = max(float((d["node_embedding"] - e["node_embedding"]).abs().max()) for d, e in zip(detached, exact))
    assert gap > 1e-3 * max(float(e["node_embedding"].abs().max()) for e in exact)  # the cross-client part matters


def test_config_checks_name_the_option():
    with pytest.raises(ConfigError, match="gradients"):
        FedSTGDConfig(gradients="approximate")
    with pytest.raises(ConfigError, match="clients=1"):
        FedSTGDConfig(adjacency="exact")
    with pytest.raises(ConfigError, match="7 available days"):
        FedSTGDConfig(train_days=4)
    with pytest.raises(ConfigError, match="gnea"):
        FedSTGDConfig(gnea="no")
    with pytest.raises(ConfigError, match="milestones"):
        FedSTGDConfig(milestones=[5, 0])
    with pytest.raises(ConfigError, match="clients"):
        FedSTGDConfig(clients=81)
    assert FedSTGDConfig(milestones=[5, 20]).milestones == (5, 20)  # JSON lists become tuples


def test_the_batch_order_is_shared_and_changes_per_epoch():
    config = FedSTGDConfig(max_windows=40)
    assert sorted(batch_order(config, 0)) == list(range(40))
    assert (batch_order(config, 0) == batch_order(dataclasses.replace(config, clients=2), 0)).all()  # not per client
    assert not (batch_order(config, 0) == batch_order(config, 1)).all()


def test_sum_counts_follow_the_configuration():
    config = FedSTGDConfig(**TINY)
    assert FedSTGDSums(config).per_batch() == 2 * 2 * 8  # one per GRU step and k, forward and backward
    assert FedSTGDSums(dataclasses.replace(config, gradients="detached")).per_batch() == 16
    assert FedSTGDSums(dataclasses.replace(config, inter_client=False)).per_batch() == 0
    assert config.batches("train") == [8, 8] and config.batches("val") == [16]
    sums = FedSTGDSums(config)
    assert [s.name for s in sums.batch(8, training=True)] == ["pq"] * 16 + ["pq-grad"] * 16  # the order the server asks in
    assert len(sums.batch(8, training=False)) == sums.per_batch(training=False) == 16


@pytest.fixture(scope="module")
def plain_and_mask():
    plan = FedSTGD(FedSTGDConfig(clients=3, rounds=2, **TINY))
    return {b: simulate(plan, SecureSumConfig(backend=b), data_dir=HZMETRO_DIR, record=True) for b in (Backend.PLAIN, Backend.MASK)}


def _numbers(metrics):
    return [v for r in metrics["rounds"] for v in (r["rmse"], r["mae"], r["mape"])] + [metrics[f"test_{k}"] for k in ("rmse", "mae", "mape")]


@needs_hzmetro
def test_mask_equals_plain_within_the_encoding_error(plain_and_mask):
    """Two rounds of training (every P/Q sum and gradient sum masked) give the plain run's
    errors to the fixed-point encoding's precision, and the server saw only masked inputs."""
    plain, mask = plain_and_mask[Backend.PLAIN].metrics, plain_and_mask[Backend.MASK].metrics
    assert _numbers(mask) == pytest.approx(_numbers(plain), rel=1e-4)
    assert mask["clients"] == 3 and mask["dropped"] == {}
    inputs = [codec.decode(wire) for stage, _, wire in plain_and_mask[Backend.MASK].received if stage is Stage.INPUT]
    payloads = [m.payload for m in inputs if isinstance(m, InputResponse) and m.payload is not None]
    assert len(payloads) >= 3 * 2 * 2 * 32  # every P/Q and gradient input of every client and batch
    assert all(p.dtype.kind == "u" for p in payloads)  # ring elements: nothing reached the server in the clear
    plain_inputs = [codec.decode(wire) for stage, _, wire in plain_and_mask[Backend.PLAIN].received if stage is Stage.INPUT]
    assert all(m.payload.dtype.kind == "f" for m in plain_inputs if isinstance(m, InputResponse))  # the baseline is in the clear


@needs_hzmetro
def test_metrics_state_the_cost_per_batch(plain_and_mask):
    metrics = plain_and_mask[Backend.MASK].metrics
    config = FedSTGDConfig(clients=3, rounds=2, **TINY)
    cost = metrics["cost"]
    assert cost["secure_sums_per_batch"] == 32 and cost["training_batches"] == 2 * 2
    assert cost["elements_up_per_client_per_batch"] == 2 * sum(FedSTGDSums(config).forward(i, 8).size for i in range(16))
    # every training-phase element the clients sent is a P/Q sum or its gradient
    assert metrics["elements_by_phase"]["training"]["up"] == 3 * cost["training_batches"] * cost["elements_up_per_client_per_batch"]
    assert metrics["bytes_up_by_phase"]["training"] >= 8 * metrics["elements_by_phase"]["training"]["up"]  # 64-bit ring elements


@needs_hzmetro
def test_without_inter_client_dependencies_no_pq_sum_is_made():
    config = FedSTGDConfig(clients=2, rounds=1, inter_client=False, **TINY)
    metrics = simulate(FedSTGD(config), SecureSumConfig(backend=Backend.PLAIN), data_dir=HZMETRO_DIR).metrics
    assert metrics["cost"]["secure_sums_per_batch"] == 0
    assert "training" not in metrics["elements_by_phase"]
    assert metrics["test_rmse"] > 0


@needs_hzmetro
def test_the_centralised_upper_bound_runs_alone_and_simulate_refuses_one_client():
    """One party with all 80 stations runs the same plan through the same runner (every sum
    its own value); a secure-sum run of one client is refused."""
    config = FedSTGDConfig(clients=1, rounds=1, adjacency="exact", **TINY)
    metrics = simulate_one_party(FedSTGD(config), data_dir=HZMETRO_DIR)
    assert metrics["plan"] == "fedstgd-centralised" and metrics["clients"] == 1 and len(metrics["rounds"]) == 1 and metrics["test_rmse"] > 0
    again = simulate_one_party(FedSTGD(config), data_dir=HZMETRO_DIR)
    assert [again[k] for k in ("rounds", "test_rmse", "test_mae", "test_mape")] == [metrics[k] for k in ("rounds", "test_rmse", "test_mae", "test_mape")]
    with pytest.raises(ConfigError):
        simulate(FedSTGD(config), SecureSumConfig(backend=Backend.PLAIN), data_dir=HZMETRO_DIR)


def test_node_embeddings_never_leave_the_client():
    """FedAvg's sum (what the server broadcasts and averages) holds every global parameter and
    not E_v; the P/Q contributions have a width independent of E_v's (GNEA's 4 units)."""
    config = FedSTGDConfig(**TINY)
    model = FedSTGDModel(config.shape, 5, 80)
    fedavg = initial_weights(config)
    assert "node_embedding" not in fedavg and "node_embedding" not in model.global_state()
    assert set(fedavg) == {n for n, _ in model.named_parameters()} - {"node_embedding"}
    assert FedSTGDSums(config).forward(0, 2).tensors[1].shape == (2, 16, 2 + config.hidden)  # Γ: 4 MLP x 4 GNEA units


def test_without_any_graph_no_sum_is_made_and_the_graph_term_is_zero(batch):
    """adjacency="off" ("w/o All,All"): no P/Q sums, and a station's prediction does not depend
    on any other station's inputs; the decomposed graph term is what it removes."""
    config = FedSTGDConfig(adjacency="off", **TINY)
    assert FedSTGDSums(config).per_batch() == 0 and not config.cross_client
    sizes, xs, _, slots = batch
    shape = ModelShape(hidden=6, node_dim=5, time_dim=4, embed_rank=3)
    model = FedSTGDModel(shape, sizes[0], sum(sizes), adjacency="off")
    model.reset_parameters(torch.Generator().manual_seed(0))
    constants = model.batch_constants(slots)
    run = lambda x: SumTape().forward(lambda i, s, S: model.segment(i, s, S, x, constants), shape.n_sums, summed_by=_ask, grad=False)  # noqa: E731
    first = _lockstep([run(xs[0])])[0]
    perturbed = xs[0].clone()
    perturbed[:, :, 1:] += 5.0  # every station but station 0
    other = _lockstep([run(perturbed)])[0]
    torch.testing.assert_close(first[:, :, 0], other[:, :, 0])  # station 0 sees no other station
    assert not torch.allclose(first[:, :, 1:], other[:, :, 1:])
    decomposed = FedSTGDModel(shape, sizes[0], sum(sizes))
    decomposed.load_state_dict(model.state_dict())
    with_graph = _lockstep([SumTape().forward(lambda i, s, S: decomposed.segment(i, s, S, xs[0], constants), shape.n_sums, summed_by=_ask, grad=False)])[0]
    assert not torch.allclose(first, with_graph)  # the graph term is what "off" removes


def _sums_by_steps(received) -> dict[str, int]:
    """How many sums went input -> deliver (streaming) and input -> consistency (full protocol)."""
    stages = [stage for stage, _, _ in received]
    counts = {"streaming": 0, "full": 0}
    for before, after in zip(stages, stages[1:]):
        if before is Stage.INPUT and after in (Stage.DELIVER, Stage.CONSISTENCY):
            counts["streaming" if after is Stage.DELIVER else "full"] += 1
    return counts


@needs_hzmetro
def test_pq_sums_take_the_streaming_variant_with_the_full_protocols_numbers(plain_and_mask):
    """With mask, every P/Q and gradient sum is two steps (input, deliver); with --no-streaming
    the same run takes the full protocol and gives the same numbers bit for bit (the self-masks
    cancel exactly in the ring)."""
    from secure_fedgraph.protocol.sum_backends import MaskConfig

    plan = FedSTGD(FedSTGDConfig(clients=3, rounds=2, **TINY))
    full = simulate(plan, SecureSumConfig(backend=Backend.MASK, mask=MaskConfig(streaming=False)), data_dir=HZMETRO_DIR, record=True)
    streaming = plain_and_mask[Backend.MASK]
    assert _numbers(full.metrics) == _numbers(streaming.metrics)
    steps, full_steps = _sums_by_steps(streaming.received), _sums_by_steps(full.received)
    assert steps["streaming"] >= 2 * 2 * 32  # every training batch's P/Q and gradient sums, plus evaluation's P/Q sums
    assert steps["full"] == full_steps["full"] - steps["streaming"]  # FedAvg, errors and normalisation keep the full protocol
    assert full_steps["streaming"] == 0


@needs_hzmetro
def test_a_client_vanishing_mid_batch_abandons_that_batch_with_plains_numbers():
    """Client 3 of 4 stops answering at its 6th masked input (a P/Q sum of the first batch). That
    streaming sum is abandoned (its inputs are never masked again), every client skips the
    batch, and the survivors train on; the numbers are the plain run's with the same dropout,
    which differ from a run where nobody leaves."""

    def vanish(direction, stage, client, data):
        if direction == "up" and client == 3:
            seen[0] += stage is Stage.INPUT
            if seen[0] >= 6:
                return None
        return data

    plan = FedSTGD(FedSTGDConfig(clients=4, rounds=2, **TINY))
    runs = {}
    for backend in (Backend.PLAIN, Backend.MASK):
        seen = [0]
        runs[backend] = simulate(plan, SecureSumConfig(backend=backend), data_dir=HZMETRO_DIR, intercept=vanish)
    mask = runs[Backend.MASK]
    assert set(mask.dropped) == {3} and set(runs[Backend.PLAIN].dropped) == {3}
    assert any("dropped during streaming sum 'pq'; abandoned" in line for line in mask.server_log)
    assert mask.metrics["abandoned_sums"] == {"pq": 1} == runs[Backend.PLAIN].metrics["abandoned_sums"]
    assert mask.metrics["cost"]["training_batches"] == runs[Backend.PLAIN].metrics["cost"]["training_batches"]
    assert _numbers(mask.metrics) == pytest.approx(_numbers(runs[Backend.PLAIN].metrics), rel=1e-4)


@needs_hzmetro
def test_sync_batch_trains_the_one_party_decomposed_model(monkeypatch):
    """With ``sync="batch"`` (the global gradients secure-summed after every batch, every client
    stepping with the pooled gradient), 3 clients train exactly the model one party with all 80
    stations trains with the decomposed graph, given the same initial node embeddings; the
    paper's per-round FedAvg (``sync="round"``) does not."""
    from secure_fedgraph.data.hzmetro import partition_stations
    from secure_fedgraph.papers import fedstgd as module

    made = module.client_model
    full = torch.randn(80, TINY["node_dim"], generator=torch.Generator().manual_seed(5)) / TINY["node_dim"] ** 0.5

    def same_embeddings(config, client_id, n_stations, weights, layout=None):  # one draw of all 80 rows, split as the clients hold them
        model = made(config, client_id, n_stations, weights, layout)
        with torch.no_grad():
            model.node_embedding.copy_(full[partition_stations(config.clients)[client_id]])
        return model

    monkeypatch.setattr(module, "client_model", same_embeddings)
    alone = _numbers(simulate_one_party(FedSTGD(FedSTGDConfig(clients=1, rounds=2, **TINY)), data_dir=HZMETRO_DIR))
    runs = {sync: simulate(FedSTGD(FedSTGDConfig(clients=3, rounds=2, sync=sync, **TINY)), SecureSumConfig(backend=Backend.MASK),
                           data_dir=HZMETRO_DIR) for sync in ("batch", "round")}
    gap = {sync: max(abs(a / b - 1) for a, b in zip(_numbers(run.metrics), alone)) for sync, run in runs.items()}
    assert gap["batch"] < 1e-4 < 1e-3 < gap["round"]  # 4 Adam steps already separate FedAvg from the pooled model
    cost = runs["batch"].metrics["cost"]
    assert cost["secure_sums_per_batch"] == 33 and "fedavg" not in runs["batch"].metrics["seconds_by_phase"]


# -- DP-SGD over the fixed shared batches ------------------------------------------------------


def test_per_window_gradients_through_the_sums_add_up_and_equal_each_window_alone(batch):
    """DP-SGD's per-window gradients (SumTape.per_sample_gradients after backward(keep=True)),
    for every client of a batch whose sums cross clients: they add up to the batch gradient, and
    window w's equals the gradient of a batch holding window w alone (whose loss is over one
    window, so B times the window's share of the batch's loss)."""
    sizes, xs, ys, slots = batch
    shape = ModelShape(hidden=6, node_dim=5, time_dim=4, embed_rank=3)
    models = _clients(shape, sizes)
    tapes = [SumTape() for _ in models]
    constants = [m.batch_constants(slots) for m in models]
    _lockstep([t.forward(lambda i, s, S, m=m, x=x, c=c: m.segment(i, s, S, x, c), shape.n_sums, summed_by=_ask)
               for t, m, x, c in zip(tapes, models, xs, constants)])
    windows = len(slots)
    losses = [(t.cuts[-1].outputs["prediction"] - y).abs().flatten(1).sum(1) / (windows * 4 * sum(sizes) * 2) for t, y in zip(tapes, ys)]
    _lockstep([t.backward(loss.sum(), summed_by=_ask, keep=True) for t, loss in zip(tapes, losses)])
    per_window = [dict(zip([n for n, _ in m.named_parameters()], t.per_sample_gradients(loss, list(m.parameters())), strict=True))
                  for t, m, loss in zip(tapes, models, losses)]
    for model, mine in zip(models, per_window):
        for name, p in model.named_parameters():
            torch.testing.assert_close(mine[name].sum(0), p.grad, rtol=1e-4, atol=1e-8, msg=name)
    for w in range(windows):
        _, alone = _tape_gradients(_clients(shape, sizes), [x[w : w + 1] for x in xs], [y[w : w + 1] for y in ys], slots[w : w + 1], exact=True)
        for mine, theirs in zip(per_window, alone):
            for name, grad in theirs.items():
                torch.testing.assert_close(mine[name][w] * windows, grad, rtol=1e-4, atol=1e-8, msg=f"window {w}, {name}")


def _dpsgd_run(**overrides):
    config = FedSTGDConfig(**{**dict(clients=3, rounds=2, **TINY), **overrides})
    return config, simulate(FedSTGD(config), SecureSumConfig(backend=Backend.PLAIN), data_dir=HZMETRO_DIR).metrics


@needs_hzmetro
def test_dpsgd_releases_each_window_once_per_epoch_priced_at_its_reach_over_the_clients():
    """16 windows in 2 fixed batches a round, 2 rounds: every window is released twice (one
    step per epoch holds it), at sample rate 1, and through the P/Q sums one client's window
    reaches all 3 clients' gradients: priced at sigma / (2 sqrt 3). Without cross-client sums it
    reaches its own client's only: sigma / 2. The noise changes the run; sync="batch" is refused."""
    from secure_fedgraph.privacy import rdp_epsilon

    config, metrics = _dpsgd_run(dpsgd_sigma=2.0, dpsgd_clip=0.5)
    privacy = metrics["privacy"]
    assert config.dpsgd_sensitivity == pytest.approx(2 * np.sqrt(3))
    assert privacy["dpsgd_steps_per_client"] == {"0": 2, "1": 2, "2": 2}
    assert privacy["epsilon_max"] == pytest.approx(rdp_epsilon([(2.0 / (2 * np.sqrt(3)), 1.0, 2)], 1e-5))
    assert privacy["unit"].startswith("one window") and "not covered" in privacy["mechanism"]
    assert metrics["test_rmse"] != _dpsgd_run()[1]["test_rmse"] and "privacy" not in _dpsgd_run()[1]
    alone, metrics = _dpsgd_run(dpsgd_sigma=2.0, inter_client=False, rounds=1)
    assert alone.dpsgd_sensitivity == 2.0
    assert metrics["privacy"]["epsilon_max"] == pytest.approx(rdp_epsilon([(1.0, 1.0, 1)], 1e-5))
    calibrated = FedSTGD(dataclasses.replace(config, dpsgd_sigma=0.0)).calibrated(20.0)
    assert rdp_epsilon([(calibrated.config.dpsgd_sigma / config.dpsgd_sensitivity, 1.0, 2)], 1e-5) <= 20.0
    with pytest.raises(ConfigError, match="dpsgd_sigma needs sync='round'"):
        FedSTGDConfig(dpsgd_sigma=1.0, sync="batch")
