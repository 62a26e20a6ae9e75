"""The "local GRU" baseline as a plan: every sensor trains alone; the server learns only the
error totals."""

from __future__ import annotations

import numpy as np
import pytest

from secure_fedgraph.papers import PLANS, LocalGRU
from secure_fedgraph.papers.fedavg import FedAvgGRUConfig
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.seeds import derive_seed
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig, Stage
from secure_fedgraph.runs.simulate import simulate
from secure_fedgraph.training.forecasting import error_sums, load_weights, train_local, weights_of
from secure_fedgraph.training.metrics import rmse_mae
from tests.helpers import pooled_normalisation

CONFIG = FedAvgGRUConfig(rounds=2, sensors=4, hidden_size=8, max_windows=40, max_local_steps=3, batch_size=16)


def test_local_gru_equals_each_sensor_training_alone():
    """The run's test RMSE/MAE equal those of four GRUs trained separately, each on its own
    sensor's windows from the broadcast initial model, pooled."""
    plan = LocalGRU(CONFIG)
    result = simulate(plan, SecureSumConfig(backend=Backend.PLAIN))
    raws = [plan.load_client_data(i, None) for i in plan.client_ids()]
    mean, std = pooled_normalisation(raws)
    initial = weights_of(plan._model())
    totals = []
    for i, raw in enumerate(raws):
        data, model = raw.normalised(mean, std), plan._model()
        load_weights(model, initial)
        for r in range(CONFIG.rounds):
            train_local(model, *data.sensor("train", 0), rng=np.random.default_rng(derive_seed(plan.seed, "client", i, "batches", r)),
                        max_steps=CONFIG.max_local_steps, batch_size=CONFIG.batch_size, lr=CONFIG.lr)
        totals.append(error_sums(model, *data.sensor("test", 0), mean=mean, std=std))
    alone = rmse_mae({k: sum(t[k] for t in totals) for k in totals[0]})
    assert (result.metrics["test_rmse"], result.metrics["test_mae"]) == pytest.approx(alone, rel=1e-5)


def test_local_gru_sends_no_weights_to_the_server():
    result = simulate(LocalGRU(CONFIG), SecureSumConfig(backend=Backend.MASK), record=True)
    assert "fedavg" not in result.metrics["elements_by_phase"]
    inputs = [codec.decode(d).payload for s, _, d in result.received if s is Stage.INPUT]
    assert inputs and all(p is None or p.size <= 4 for p in inputs)  # moments and error totals only (and the count lane), never a model
    assert PLANS["local-gru"] is LocalGRU and result.metrics["plan"] == "local-gru"
