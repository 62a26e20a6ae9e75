"""FedAvg with distributed DP (fedavg-gru, fedavg-vector; threat_model.md DDP-NOISE,
DDP-ACCOUNT): the clients' clipped, noised updates through the secure sum, the run's epsilon
from the survivors' noise, and clients that refuse a run without the noise they require."""

from __future__ import annotations

import math

import numpy as np
import pytest

from secure_fedgraph.errors import ProtocolError
from secure_fedgraph.papers import FedAvgGRU, FedAvgVector
from secure_fedgraph.papers.fedavg import FedAvgGRUConfig
from secure_fedgraph.papers.synthetic import FedAvgVectorConfig
from secure_fedgraph.privacy.analysis.skellam import SkellamRelease, sensitivities, skellam_epsilon
from secure_fedgraph.protocol.sum_backends import Backend, ClientPolicy, SecureSumConfig, Stage
from secure_fedgraph.runs.simulate import simulate

GRU = FedAvgGRUConfig(rounds=2, sensors=4, hidden_size=8, max_windows=40, max_local_steps=2, batch_size=16)


def _vector(**options) -> FedAvgVector:
    return FedAvgVector(FedAvgVectorConfig(**{"clients": 5, "length": 2000, "rounds": 2, **options}))


def test_fedavg_vector_with_distributed_dp_reports_the_survivors_epsilon():
    """One round of 5 clients, 5 expected (ceil(5 x 0.9)): the sum carries the stated noise and
    the run's epsilon is the Skellam bound of that one release."""
    noisy = simulate(_vector(rounds=1, ddp_noise=4.0, ddp_clip=0.5), SecureSumConfig())
    privacy = noisy.metrics["privacy"]
    assert privacy["expected_contributors"] == math.ceil(5 * 0.9) and privacy["sums"][0]["contributors"] == 5
    assert privacy["sums"][0]["noise_multiplier"] == pytest.approx(4.0 * math.sqrt(5 / 5))
    l1, l2 = sensitivities(l2_clip=0.5, precision_bits=20, dimension=2000)
    expected = skellam_epsilon([SkellamRelease(l1, l2, 5 * (4.0 * 0.5 * 2**20) ** 2 / 5)], 1e-5)
    assert privacy["epsilon_max"] == pytest.approx(expected) and math.isfinite(expected)
    assert privacy["epsilon_if_all_expected"] == privacy["epsilon_max"]
    accountants = privacy["accountants"]  # both accountants: Skellam RDP, and PRV of the Gaussian limit (tighter, and close)
    assert accountants["rdp"]["epsilon_max"] == privacy["epsilon_max"]
    assert 0.7 * privacy["epsilon_max"] < accountants["prv"]["epsilon_max"] < privacy["epsilon_max"]


def test_a_dropout_costs_epsilon_and_the_report_says_how_much():
    """Client 3 vanishes before its input in round 1: that sum carries 4/5 of the noise; the
    epsilon of the clients that contributed grows, the report shows the sum's multiplier."""
    full = simulate(_vector(ddp_noise=2.0), SecureSumConfig()).metrics["privacy"]
    dropped = simulate(_vector(ddp_noise=2.0), SecureSumConfig(), drop={Stage.INPUT: {3}}).metrics["privacy"]
    assert [s["contributors"] for s in dropped["sums"]] == [4, 4]
    assert dropped["sums"][0]["noise_multiplier"] == pytest.approx(2.0 * math.sqrt(4 / 5))
    assert dropped["epsilon_max"] > full["epsilon_max"]
    assert "3" not in dropped["epsilon_per_client"]  # it released nothing
    assert dropped["epsilon_with_colluders"] > dropped["epsilon_max"]  # a colluder subtracts its own noise


def test_with_plain_the_report_counts_each_inputs_own_noise_only():
    mask = simulate(_vector(rounds=1, ddp_noise=2.0), SecureSumConfig()).metrics["privacy"]
    plain = simulate(_vector(rounds=1, ddp_noise=2.0), SecureSumConfig(backend=Backend.PLAIN)).metrics["privacy"]
    l1, l2 = sensitivities(l2_clip=1.0, precision_bits=20, dimension=2000)
    one_share = skellam_epsilon([SkellamRelease(l1, l2, (2.0 * 2**20) ** 2 / 5)], 1e-5)  # one client's share: 1/5 of the variance
    assert plain["server_sees"].startswith("each noisy input") and plain["epsilon_max"] == pytest.approx(one_share)
    assert plain["epsilon_max"] > 2 * mask["epsilon_max"]


def test_fedavg_gru_with_distributed_dp_trains_and_reports_epsilon():
    private = simulate(FedAvgGRU(GRU.__class__(**{**GRU.__dict__, "ddp_noise": 1.0, "ddp_clip": 0.5})), SecureSumConfig()).metrics
    plain_fedavg = simulate(FedAvgGRU(GRU), SecureSumConfig()).metrics
    assert "privacy" not in plain_fedavg and math.isfinite(private["test_rmse"])
    assert private["test_rmse"] != plain_fedavg["test_rmse"]
    assert private["privacy"]["epsilon_max"] > 0 and len(private["privacy"]["sums"]) == GRU.rounds


def test_clients_with_a_ddp_floor_refuse_a_run_without_it():
    """ClientPolicy(min_ddp_noise=1) against a fedavg-gru run without distributed DP: every
    client refuses its model sum (the run cannot go on); so does it with ddp_noise=1, since a sum
    of 3 of the 4 (the survivor floor) would carry 0.87 (DDP-FLOOR); with ddp_noise=1.16 the run
    completes."""
    policy = ClientPolicy(backends=frozenset({Backend.MASK}), min_dp_sigma=0.0, min_ddp_noise=1.0)
    with pytest.raises(ProtocolError, match="noise multiplier 0 per unit of its sensitivity, below 1"):
        simulate(FedAvgVector(FedAvgVectorConfig(clients=4, length=50)), SecureSumConfig(), policy=policy)
    with pytest.raises(ProtocolError, match=r"multiplier 0.866 \(multiplier 1 spread over 4 expected contributors, 4 asked, 3 may be all"):
        simulate(FedAvgVector(FedAvgVectorConfig(clients=4, length=50, ddp_noise=1.0)), SecureSumConfig(), policy=policy)
    done = simulate(FedAvgVector(FedAvgVectorConfig(clients=4, length=50, ddp_noise=1.16)), SecureSumConfig(), policy=policy)
    assert done.metrics["privacy"]["epsilon_max"] > 0
