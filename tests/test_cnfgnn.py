"""CNFGNN as a protocol (in-process): the paper's model sizes and cost formula, mask equals
plain, what the server sees, DP accounting, a client dropping mid-round."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from secure_fedgraph.models import GraphNet, GRUSeq2Seq
from secure_fedgraph.papers import CNFGNN
from secure_fedgraph.papers.cnfgnn import CNFGNNConfig, server_batches
from secure_fedgraph.privacy import GaussianRows, epsilon_of
from secure_fedgraph.protocol import codec
from secure_fedgraph.protocol.messages import UploadResponse, tensors_of
from secure_fedgraph.protocol.secure_sum import Backend, SecureSumConfig, Stage
from secure_fedgraph.simulate import simulate

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


def test_the_server_never_receives_raw_data_targets_or_weights():
    """Everything the server received, decoded: hidden states, their gradients, masked sums
    and released error totals; no tensor equals (or contains) a client's speeds or weights."""
    result = _run(Backend.MASK)
    uploads = {}
    for stage, _, data in result.received:
        message = codec.decode(data)
        if isinstance(message, UploadResponse):
            uploads.setdefault(message.name, []).append(tensors_of(message.tensors))
        if stage is Stage.INPUT:
            assert not isinstance(message, UploadResponse)
    assert set(uploads) == {"window_counts", "h_c:train", "h_c:val", "h_c:test", "dL/dh_G"}  # mask: the server holds the error sums
    speeds = [np.round(h.context.data.x["train"][..., 0].ravel(), 4) for h in result.hosts.values()]
    for name, answers in uploads.items():
        for tensors in answers:
            for value in tensors.values():
                flat = np.round(np.asarray(value, dtype=np.float64).ravel(), 4)
                for s in speeds:
                    assert np.isin(s[s > 1], flat).mean() < 0.01, name  # no speed reading (mph) shows up


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
    assert privacy["epsilon_max"] == pytest.approx(epsilon_of(sigma, 2, 1e-5).epsilon)
    assert set(privacy["releases_per_client"].values()) == {2}
    assert noisy.metrics["test_rmse"] != plain.metrics["test_rmse"]
    uploads = [tensors_of(codec.decode(d).tensors)["h"] for s, _, d in noisy.received
               if s is Stage.UPLOAD and codec.decode(d).name == "h_c:train"]
    # clipped to 0.5 then noised with std 0.5: the rows' spread is the noise's, not the GRU's
    assert np.std(np.concatenate(uploads)) == pytest.approx(sigma * clip, rel=0.1)
    assert "privacy" not in plain.metrics
    again = _run(Backend.PLAIN, dp_sigma=sigma, dp_clip=clip)  # same run seed: the noise must not follow from it
    first_upload = lambda r: next(tensors_of(codec.decode(d).tensors)["h"] for s, _, d in r.received  # noqa: E731
                                  if s is Stage.UPLOAD and codec.decode(d).name == "h_c:train")
    assert not np.allclose(first_upload(noisy), first_upload(again))


def test_gaussian_rows_clips_and_noises_each_row():
    rows = np.full((4000, 16), 3.0, dtype=np.float32)
    hook = GaussianRows(clip=1.0, sigma=0.0)
    out = hook({"h": rows})["h"]
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5) and hook.clipped_rows == 4000
    noisy = GaussianRows(clip=1.0, sigma=2.0, key=b"k" * 32)({"h": rows})["h"]
    noise = (noisy - out).ravel()
    assert noise.std() == pytest.approx(2.0, rel=0.03) and abs(noise.mean()) < 0.05
    assert not np.allclose(GaussianRows(1.0, 2.0)({"h": rows})["h"], noisy)  # fresh key per release by default


def test_a_sensor_client_dropping_mid_round_does_not_stop_the_run():
    result = simulate(CNFGNN(CNFGNNConfig(**{**TINY, "rounds": 2})), SecureSumConfig(backend=Backend.MASK),
                      drop={Stage.SCATTER: [2]})
    assert 2 in result.dropped
    assert result.metrics["rounds"][-1]["clients"] == 3 and result.metrics["test_rmse"] > 0
