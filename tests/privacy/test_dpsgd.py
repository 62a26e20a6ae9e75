"""DP-SGD through opacus' GradSampleModule and DPOptimizer: per-sample gradients, clipping and
noise checked against a hand computation, the gradient-inversion attack it stops, and the
FedAvg plan with it (steps counted by the optimiser, reported by the server, calibrated)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from secure_fedgraph.models import GRUSeq2Seq
from secure_fedgraph.errors import ProtocolError
from secure_fedgraph.papers.fedavg import FedAvgGRU, FedAvgGRUConfig
from secure_fedgraph.privacy import NoiseSource, PrivacyAccountant, Steps, rdp_epsilon
from secure_fedgraph.privacy.mechanisms import dpsgd
from secure_fedgraph.privacy.mechanisms.dpsgd import DPSGD, Twin
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig
from secure_fedgraph.protocol.sum_backends.policy import ClientPolicy
from secure_fedgraph.runs.simulate import simulate
from tests.helpers import defence_stops


def test_the_twin_gives_each_samples_own_gradient():
    """opacus' per-sample gradients of GRUSeq2Seq's twin (DPGRU, DPGRUCell) equal autograd's on
    each sample of the original model alone."""
    from opacus import GradSampleModule

    torch.manual_seed(0)
    model = GRUSeq2Seq(hidden_size=8, graph_size=4)
    twin = Twin.of(model)
    x, tod, y, g = torch.randn(4, 12, 2), torch.randn(4, 12), torch.randn(4, 12), torch.randn(4, 4)
    module = GradSampleModule(twin.module, loss_reduction="mean")
    nn.functional.mse_loss(module(x, tod, graph=g), y).backward()
    for name, parameter in twin.module.named_parameters():
        own = []
        for i in range(4):
            model.zero_grad()
            nn.functional.mse_loss(model(x[i : i + 1], tod[i : i + 1], graph=g[i : i + 1]), y[i : i + 1]).backward()
            own.append(dict(model.named_parameters())[twin.names[name]].grad.clone())
        assert torch.allclose(parameter.grad_sample, torch.stack(own), atol=1e-6), name


def _one_step(x: torch.Tensor, y: torch.Tensor, *, sigma: float, clip: float, rate: float, noise: NoiseSource) -> tuple[nn.Linear, nn.Linear, DPSGD]:
    """One DP-SGD step (SGD, learning rate 1) of a linear model on (x, y); returns (before, after, mechanism)."""
    torch.manual_seed(1)
    before = nn.Linear(x.shape[1], 1)
    after = nn.Linear(x.shape[1], 1)
    after.load_state_dict(before.state_dict())
    accountant = PrivacyAccountant()
    mechanism = DPSGD(sigma, clip, rate, noise=noise, record=lambda s: accountant.record_steps(0, s))
    with mechanism.training(after, lambda p: torch.optim.SGD(p, lr=1.0), samples=len(x)) as (module, optimiser):
        idx = torch.as_tensor(mechanism.sample(len(x)))
        optimiser.zero_grad()
        nn.functional.mse_loss(module(x[idx]).squeeze(1), y[idx]).backward()
        optimiser.step()
    mechanism.accountant = accountant
    return before, after, mechanism


def test_one_step_is_the_sum_of_clipped_per_sample_gradients_plus_noise_over_the_expected_batch():
    rng = np.random.default_rng(0)
    x, y = torch.as_tensor(rng.normal(size=(50, 3)) * 10, dtype=torch.float32), torch.as_tensor(rng.normal(size=50), dtype=torch.float32)
    noise = NoiseSource.reproducible(b"test")
    sigma, clip, rate = 0.7, 0.5, 0.2
    before, after, mechanism = _one_step(x, y, sigma=sigma, clip=clip, rate=rate, noise=noise)
    idx = np.flatnonzero(noise.uniform(50, "dpsgd sample", 0) < rate)  # the same Poisson sample
    total = {"weight": torch.zeros(1, 3), "bias": torch.zeros(1)}
    clipped = 0
    for i in idx:
        before.zero_grad()
        nn.functional.mse_loss(before(x[i : i + 1]).squeeze(1), y[i : i + 1]).backward()
        norm = torch.sqrt(before.weight.grad.square().sum() + before.bias.grad.square().sum())
        factor = min(1.0, clip / (float(norm) + 1e-6))
        clipped += float(norm) > clip
        total = {k: total[k] + factor * getattr(before, k).grad for k in total}
    assert 0 < clipped < len(idx)  # clipping mattered for some samples, not all
    for index, name in enumerate(("weight", "bias")):  # DPOptimizer's parameter order
        drawn = torch.as_tensor(noise.normal(total[name].numel(), "dpsgd noise", 0, index) * sigma * clip, dtype=torch.float32).view_as(total[name])
        expected = getattr(before, name) - (total[name] + drawn) / round(rate * 50)
        assert torch.allclose(getattr(after, name), expected, atol=1e-5), name
    assert mechanism.accountant.steps_of(0) == [Steps(sigma, rate, 1)]


def test_attack_a_single_samples_update_gives_it_away_unless_dpsgd_noises_it(monkeypatch):
    """Gradient inversion (the server, or colluders, read a client's model update): for a
    linear layer the update of one sample's step is (dL/dy) x for the weights and dL/dy for the
    bias, so x = update_w / update_b exactly. DP-SGD's noise leaves the ratio meaningless;
    without the noise (clipping alone rescales, which the ratio ignores) it recovers x."""
    x, y = torch.tensor([[3.0, -1.0, 2.0, 0.5]]), torch.tensor([7.0])

    def attack() -> bool:
        before, after, _ = _one_step(x, y, sigma=1.0, clip=1.0, rate=1.0, noise=NoiseSource())
        update_w, update_b = (before.weight - after.weight).detach(), (before.bias - after.bias).detach()
        recovered = update_w[0] / update_b[0]
        return bool(torch.allclose(recovered, x[0], rtol=1e-3))

    def no_noise(self) -> None:
        for p in self.params:
            p.grad = p.summed_grad.view_as(p)

    defence_stops(attack, monkeypatch, dpsgd._ClientNoiseDPOptimizer, "add_noise", no_noise)


TINY = dict(sensors=3, hidden_size=8, max_windows=40, batch_size=10, rounds=2)


def _fedavg(reproducible: bool = False, **overrides):
    return simulate(FedAvgGRU(FedAvgGRUConfig(**{**TINY, **overrides})), SecureSumConfig(backend=Backend.MASK), reproducible_noise=reproducible)


def test_fedavg_with_dpsgd_reports_what_each_clients_optimiser_counted():
    """40 training windows, expected batch 10: q = 0.25, 4 steps a round, 8 in 2 rounds."""
    result = _fedavg(dpsgd_sigma=1.1, dpsgd_clip=0.5)
    privacy = result.metrics["privacy"]
    assert privacy["dpsgd_steps_per_client"] == {"0": 8, "1": 8, "2": 8}
    assert privacy["epsilon_max"] == pytest.approx(rdp_epsilon([(1.1, 0.25, 8)], 1e-5))
    assert 0.8 * privacy["epsilon_max"] <= privacy["accountants"]["prv"]["epsilon_max"] <= privacy["epsilon_max"]
    assert "DP-SGD" in privacy["mechanism"] and privacy["unit"].startswith("one training window")
    assert result.metrics["test_rmse"] != _fedavg().metrics["test_rmse"]
    assert "privacy" not in _fedavg().metrics


def test_dpsgd_noise_is_the_clients_own_and_reproducible_only_on_request():
    """Fresh OS randomness by default (two runs with one seed differ); the client's opt-in
    derives it from the run seed (two runs agree: what transports are compared with)."""
    numbers = lambda r: [r.metrics["test_rmse"], *(x["val_rmse"] for x in r.metrics["rounds"])]  # noqa: E731
    assert numbers(_fedavg(dpsgd_sigma=1.0)) != numbers(_fedavg(dpsgd_sigma=1.0))
    assert numbers(_fedavg(True, dpsgd_sigma=1.0)) == numbers(_fedavg(True, dpsgd_sigma=1.0))


def test_a_target_epsilon_calibrates_dpsgd():
    plan = FedAvgGRU(FedAvgGRUConfig(**TINY)).calibrated(2.0)
    privacy = simulate(plan, SecureSumConfig(backend=Backend.PLAIN)).metrics["privacy"]
    assert 2.0 - 0.01 <= privacy["epsilon_max"] <= 2.0


def test_attack_a_server_announcing_training_without_dpsgd_to_a_client_that_requires_it(monkeypatch):
    """DP-SGD-FLOOR: a deviating server announces fedavg-gru with dpsgd_sigma 0 to a client
    started with --min-dpsgd-sigma 1. The client's Welcome check refuses it; without the check
    the client would train as announced, and its single-sample update gives the sample away."""
    announced = FedAvgGRU(FedAvgGRUConfig(**TINY))  # no DP-SGD
    policy = ClientPolicy(min_dp_sigma=0.0, min_dpsgd_sigma=1.0)
    x, y = torch.tensor([[3.0, -1.0, 2.0, 0.5]]), torch.tensor([7.0])

    def attack() -> bool:
        try:
            policy.check_run(SecureSumConfig(), n_run=3, dpsgd_sigma=announced.dpsgd_sigma)
        except ProtocolError:
            return False
        if announced.dpsgd_sigma:  # the client trains as announced: DP-SGD (client_mechanism) or plain steps
            before, after, _ = _one_step(x, y, sigma=announced.dpsgd_sigma, clip=1.0, rate=1.0, noise=NoiseSource())
            update_w, update_b = (before.weight - after.weight).detach(), (before.bias - after.bias).detach()
        else:
            model = nn.Linear(4, 1)
            nn.functional.mse_loss(model(x).squeeze(1), y).backward()
            update_w, update_b = model.weight.grad, model.bias.grad
        return bool(torch.allclose(update_w[0] / update_b[0], x[0], rtol=1e-3))

    with pytest.raises(ProtocolError, match=r"trains with dpsgd_sigma=0, and this client requires .* at least 1 .*\(--min-dpsgd-sigma\)"):
        policy.check_run(SecureSumConfig(), n_run=3, dpsgd_sigma=0.0)
    with pytest.raises(ProtocolError, match=r"has no DP-SGD in its local training"):
        policy.check_run(SecureSumConfig(), n_run=3, dpsgd_sigma=None)  # fedavg-vector: no DP-SGD option at all
    policy.check_run(SecureSumConfig(), n_run=3, dpsgd_sigma=1.0)  # enough noise: accepted
    defence_stops(attack, monkeypatch, ClientPolicy, "check_run", lambda self, config, **kw: None)
