"""The attacks measure leakage (secure_fedgraph/audit/attacks/): on a tiny real CNFGNN run
(12 METR-LA sensors), uploads without noise give the raw input speeds away and the gradients
add to what the server knows of the targets; with DP noise (sigma 4) the reconstruction is no
better than a guess, while the same decoder on the clean activations (the clients' records)
still recovers them."""

from __future__ import annotations

import pathlib

import pytest

from secure_fedgraph.audit import Verdict, audit
from secure_fedgraph.papers.cnfgnn import CNFGNN, CNFGNNConfig
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig
from secure_fedgraph.runs.simulate import simulate

SMALL = dict(sensors=12, hidden_size=8, gn_hidden=16, gn_update=8, max_windows=60, batch_size=16, server_batch_size=12, rounds=1)
GUESS = "random guess"


def _audited(folder: pathlib.Path, sigma: float):
    simulate(CNFGNN(CNFGNNConfig(**SMALL, dp_sigma=sigma)), SecureSumConfig(backend=Backend.PLAIN), transcripts=folder)
    return audit(folder, sorted((folder / "clients").glob("client-*.bin")))


@pytest.fixture(scope="module")
def no_dp(tmp_path_factory):
    return _audited(tmp_path_factory.mktemp("no-dp"), 0.0)


def test_without_dp_the_uploads_give_the_input_speeds_away(no_dp):
    finding = no_dp.finding("DP-CLIENT")
    assert finding.verdict is Verdict.NOT_APPLICABLE and "claims no noise" in finding.evidence
    (attack,) = finding.attacks
    assert attack.details["public_clients"] == 3 and attack.details["private_clients"] == 9
    assert attack.errors["attack on the uploads"] < 0.6 * attack.errors[GUESS], attack.summary
    assert attack.details["epsilon"] == float("inf")


def test_the_unnoised_gradients_leak_the_targets(no_dp):
    (attack,) = no_dp.finding("DP-UNIT").attacks
    assert attack.errors["attack with the gradients"] < 0.85 * attack.errors["without the gradients (h_G, h_c)"], attack.summary
    assert attack.errors["attack with the gradients"] < attack.errors[GUESS]


@pytest.fixture(scope="module")
def noised(tmp_path_factory):
    return _audited(tmp_path_factory.mktemp("sigma-4"), 4.0)


def test_dp_noise_stops_the_reconstruction_that_the_clean_activations_allow(noised):
    report = noised
    (attack,) = report.finding("DP-CLIENT").attacks
    assert report.finding("DP-CLIENT").verdict is Verdict.PASS
    assert attack.errors["attack on the uploads"] > 0.9 * attack.errors[GUESS], attack.summary
    assert attack.errors["no-DP reference (clean h_c,i)"] < 0.6 * attack.errors[GUESS], attack.summary
    assert 0 < attack.details["epsilon"] < 2


def test_attack_error_against_epsilon_over_audited_runs(no_dp, noised, tmp_path):
    """What a sweep attaches: each run's audit.json, one point per run and attack."""
    from secure_fedgraph.audit import write_report
    from secure_fedgraph.audit.curves import attack_points, leakage_against_epsilon

    files = [write_report(report, tmp_path / name)["json"] for name, report in (("no-dp", no_dp), ("sigma-4", noised))]
    points = attack_points(files)
    reconstruction = points["reconstruction of raw inputs from h_c,i"]
    assert [p["sigma"] for p in reconstruction] == [4.0, 0.0] and reconstruction[1]["epsilon"] == float("inf")
    assert reconstruction[0]["errors"]["attack on the uploads"] > reconstruction[1]["errors"]["attack on the uploads"]
    png = leakage_against_epsilon(files, tmp_path / "leakage.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_the_plans_a_sweep_can_attack_are_the_attacks_own():
    """The plans registered as ``attacked`` (what `sweep --attacks` accepts, checked before torch)
    are exactly the plans some attack in the audit's registry applies to."""
    from secure_fedgraph.audit.attacks import ATTACKS
    from secure_fedgraph.papers import ENTRIES

    assert frozenset(entry.name for entry in ENTRIES if entry.attacked) == frozenset().union(*(attack.plans for attack in ATTACKS))
