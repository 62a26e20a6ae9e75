"""Each traffic plan on more than one dataset (issue 33): CNFGNN and fedavg-gru on METR-LA,
PEMS-BAY's real graph (with SYNTHETIC speeds: the shared data have no PEMS-BAY readings) and
NYCBike1; FedSTGD on HZMetro and NYCBike1. A dataset given as a graph-series folder runs the
same numbers as by name, and the sizes come from the data."""

from __future__ import annotations

import numpy as np
import pytest

from secure_fedgraph.data import sources
from secure_fedgraph.data.graph_series import write_folder
from secure_fedgraph.data.sources import load_series
from secure_fedgraph.errors import ConfigError
from secure_fedgraph.papers.cnfgnn import CNFGNN, CNFGNNConfig
from secure_fedgraph.papers.fedavg import FedAvgGRU, FedAvgGRUConfig
from secure_fedgraph.papers.fedstgd import FedSTGD, FedSTGDConfig, initial_weights
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig
from secure_fedgraph.runs.simulate import simulate
from tests.helpers import HZMETRO_DIR, needs_hzmetro
from tests.helpers.data import NYCBIKE1_DIR, needs_nycbike1, needs_pems_bay_graph, pems_bay_with_synthetic_speeds

CNFGNN_TINY = dict(sensors=3, rounds=1, max_windows=40, max_local_steps=1, max_server_batches=1, hidden_size=8, gn_hidden=8, gn_update=8)
FEDSTGD_TINY = dict(clients=3, rounds=1, hidden=8, node_dim=8, time_dim=8, embed_rank=2, max_windows=16, batch_size=8, eval_batch_size=16)
PLAIN = SecureSumConfig(backend=Backend.PLAIN)


def _errors(metrics: dict) -> list[float]:
    return [metrics["test_rmse"], metrics["test_mae"]]


def test_cnfgnn_on_a_folder_runs_the_numbers_it_runs_by_name(tmp_path):
    folder = write_folder(load_series("metr-la").first_nodes(5), tmp_path / "metr-la-5")  # the packaged week, 5 sensors
    by_name = simulate(CNFGNN(CNFGNNConfig(**CNFGNN_TINY)), PLAIN).metrics
    by_folder = simulate(CNFGNN(CNFGNNConfig(dataset=str(folder), **CNFGNN_TINY)), PLAIN).metrics
    assert _errors(by_folder) == _errors(by_name)
    with pytest.raises(ConfigError, match=r"sensors must be an int in \[2, 5\], got 6"):
        CNFGNNConfig(dataset=str(folder), sensors=6)


@needs_pems_bay_graph
def test_cnfgnn_and_fedavg_run_on_pems_bay_with_every_sensor_a_client(tmp_path):
    root = pems_bay_with_synthetic_speeds(tmp_path)  # SYNTHETIC speeds on PEMS-BAY's real graph
    assert len(CNFGNN(CNFGNNConfig(dataset="pems-bay")).client_ids()) == 325  # no 207 cap
    plan = CNFGNN(CNFGNNConfig(dataset="pems-bay", steps_in=6, steps_out=3, **CNFGNN_TINY))
    windows = plan.load_client_data(0, root)
    assert windows.x["train"].shape[1:] == (6, 1, 2) and windows.y["train"].shape[1:] == (3, 1)
    graph = plan.load_server_data(root)
    assert graph.nodes == 3 and graph.edge_index.shape[1] == np.count_nonzero(load_series("pems-bay", root).adjacency[:3, :3])
    metrics = simulate(plan, PLAIN, data_dir=root).metrics
    assert 0 < metrics["test_mae"] <= metrics["test_rmse"] < 60
    fedavg = simulate(FedAvgGRU(FedAvgGRUConfig(dataset="pems-bay", sensors=3, rounds=1, max_windows=40, max_local_steps=1, hidden_size=8)),
                      PLAIN, data_dir=root).metrics
    assert 0 < fedavg["test_mae"] <= fedavg["test_rmse"] < 60


@needs_nycbike1
def test_cnfgnn_runs_on_nycbike1_hourly_counts():
    plan = CNFGNN(CNFGNNConfig(dataset="nycbike1", **CNFGNN_TINY))
    tod = plan.load_client_data(0, NYCBIKE1_DIR).x["train"][:, :, 0, 1]  # (windows, steps, this sensor, [value, time of day])
    assert np.allclose(np.diff(tod[0]) % 1, 1 / 24)  # time of day from the data's hourly step, not METR-LA's 5 minutes
    metrics = simulate(plan, PLAIN, data_dir=NYCBIKE1_DIR).metrics
    assert np.isfinite(_errors(metrics)).all()


@needs_nycbike1
@needs_hzmetro
def test_fedstgd_takes_its_sizes_from_each_dataset():
    for dataset, data_dir, slots, days in (("hzmetro", HZMETRO_DIR, 73, (5, 1, 1)), ("nycbike1", NYCBIKE1_DIR, 24, (40, 6, 11))):
        config = FedSTGDConfig(dataset=dataset, **FEDSTGD_TINY)
        assert config.shape.slots_per_day == slots and config.days() == days
        assert initial_weights(config)["time_embedding"].shape[0] == slots  # E_τ: one row per slot of the data's day
        metrics = simulate(FedSTGD(config), SecureSumConfig(backend=Backend.MASK), data_dir=data_dir).metrics
        assert np.isfinite([metrics["test_rmse"], metrics["test_mae"]]).all() and metrics["clients"] == 3


@needs_nycbike1
def test_fedstgd_window_lengths_and_day_split_are_options():
    config = FedSTGDConfig(dataset="nycbike1", steps_in=6, steps_out=2, train_days=50, val_days=3, test_days=4, **FEDSTGD_TINY)
    data = FedSTGD(config).load_client_data(0, NYCBIKE1_DIR)
    assert data.splits.train.x.shape[1] == 6 and data.splits.train.y.shape[1] == 2
    assert config.windows("val") == min(16, 3 * (24 - 8 + 1))
    with pytest.raises(ConfigError, match="must be the dataset's 57 available days"):
        FedSTGDConfig(dataset="nycbike1", train_days=5, val_days=1, test_days=1)
    with pytest.raises(ConfigError, match="at most the 128 stations of nycbike1"):
        FedSTGDConfig(dataset="nycbike1", clients=129)


@pytest.fixture(autouse=True)
def _fresh_cache():
    yield
    sources._load.cache_clear()


@needs_hzmetro
def test_cnfgnn_normalises_passenger_counts_whose_squares_pass_the_speed_bound():
    """HZMetro's inflows reach thousands: the normalisation sum's clip is 1e8 there (1e4, the
    speed datasets', clipped each station's mean square and made the variance negative)."""
    from secure_fedgraph.papers.traffic import moments_spec

    assert moments_spec(CNFGNNConfig()).clip_range == 1e4 and moments_spec(CNFGNNConfig(dataset="hzmetro")).clip_range == 1e8
    assert moments_spec(CNFGNNConfig(dataset="hzmetro", moments_clip=5e5)).clip_range == 5e5
    config = CNFGNNConfig(dataset="hzmetro", **{**CNFGNN_TINY, "max_windows": None})
    metrics = simulate(CNFGNN(config), SecureSumConfig(backend=Backend.MASK), data_dir=HZMETRO_DIR).metrics
    assert 0 < metrics["test_mae"] <= metrics["test_rmse"] < 1000  # passengers per 15 minutes
