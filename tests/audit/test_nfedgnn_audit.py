"""The audit of nFedGNN runs (secure_fedgraph/audit/): NF-LATENT and NF-DP checked from the
transcripts, DP-ACCOUNT recomputed from the latents, and the attacks on the latents (words of
x_i from round 0's latents, links from their similarity) measured on tiny real Cora runs
(400 users, one round): without noise they recover words and edges, with sigma 1 (clip 0.05)
no more than a guess."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from secure_fedgraph.audit import Verdict, audit
from secure_fedgraph.papers.nfedgnn import NFedGNN, NFedGNNConfig
from secure_fedgraph.privacy import GaussianRows
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig
from secure_fedgraph.runs.simulate import simulate
from tests.helpers import PLANETOID_DIR, client_transcripts, defence_stops, needs_planetoid

pytestmark = needs_planetoid
USERS = 400  # the first 400 Cora nodes: 134 edges among them, a public slice of 100
NOISED = dict(dp_sigma=1.0, dp_clip=0.05)
GUESS = "random guess"


def _run(folder: pathlib.Path, backend: str = "plain", **options) -> pathlib.Path:
    plan = NFedGNN(NFedGNNConfig(**{"users": USERS, "rounds": 1, **options}))
    result = simulate(plan, SecureSumConfig(backend=Backend(backend)), data_dir=PLANETOID_DIR, transcripts=folder)
    (folder / "metrics.json").write_text(json.dumps(result.metrics, default=str))
    return folder


def _audit(run: pathlib.Path, *, clients: bool = True, attacks: bool = False):
    return audit(run, client_transcripts(run) if clients else [], data_dir=PLANETOID_DIR, attacks=attacks)


def test_latents_pass_nf_latent_and_fedavg_over_plain_fails_it(tmp_path):
    """Per-user weights: every upload one (1, 16) row per latent, no key set-up, no sum. The
    leaky setting: FedAvg'ed W_i over the plain backend shows the server each W_i."""
    report = _audit(_run(tmp_path / "own", users=120), attacks=False)
    assert report.finding("NF-LATENT").verdict is Verdict.PASS and "no key set-up and no secure sum" in report.finding("NF-LATENT").evidence
    assert report.passed and report.finding("DP-CLIENT").verdict is Verdict.NOT_APPLICABLE
    leaky = _audit(_run(tmp_path / "fedavg", users=120, user_weights="fedavg"), attacks=False)
    assert leaky.failed == ["M-UNIFORM", "M-NOPLAIN", "NF-LATENT"], [(f.claim, f.evidence) for f in leaky.findings if not f.passed]
    assert leaky.finding("NF-LATENT").details["clear_weights"] == 120


def test_fedsgd_passes_nf_latent_over_mask_and_fails_it_over_plain(tmp_path):
    """FedSGD's sums (each user's dL/dW_i every round, and W_i^(0) with the users' own
    randomness) are the sums its plan names: hidden by mask, each one shown by plain."""
    report = _audit(_run(tmp_path / "masked", backend="mask", users=60, rounds=1, user_weights="fedsgd"), attacks=False)
    assert report.finding("NF-LATENT").verdict is Verdict.PASS, report.finding("NF-LATENT").evidence
    assert "120 summed inputs of dL/dW_i and W_i^(0), masked or encrypted" in report.finding("NF-LATENT").evidence
    leaky = _audit(_run(tmp_path / "plain", users=60, rounds=1, user_weights="fedsgd"), attacks=False)
    assert leaky.finding("NF-LATENT").verdict is Verdict.FAIL and leaky.finding("NF-LATENT").details["clear_weights"] == 120


def test_nf_dp_is_checked_from_both_sides_and_a_user_skipping_its_noise_fails_it(tmp_path, monkeypatch):
    """With sigma 1 the residuals match sigma * clip (client transcripts) and the rows' norms
    carry the noise (server-only); DP-ACCOUNT recomputes the run's epsilon from the latents the
    transcript shows, and a report that understates it fails. Users whose DP hook only clips
    while the run claims sigma 1 fail NF-DP in both modes."""
    run = _run(tmp_path / "noised", users=120, **NOISED)
    for clients in (True, False):
        report = _audit(run, clients=clients)
        assert report.passed and report.finding("NF-DP").verdict is Verdict.PASS, report.finding("NF-DP").evidence
        assert report.finding("DP-ACCOUNT").verdict is Verdict.PASS, report.finding("DP-ACCOUNT").evidence
    metrics = json.loads((run / "metrics.json").read_text())
    assert report.finding("DP-ACCOUNT").details["epsilon"] == pytest.approx(metrics["privacy"]["epsilon_max"], rel=1e-9)
    metrics["privacy"]["epsilon_max"] /= 2
    (run / "metrics.json").write_text(json.dumps(metrics))
    assert _audit(run, clients=False).failed == ["DP-ACCOUNT"]

    from secure_fedgraph.privacy.mechanisms.gaussian import clip_rows

    monkeypatch.setattr(GaussianRows, "__call__", lambda self, tensors: {k: clip_rows(np.asarray(v), self.clip)[0] for k, v in tensors.items()})
    leaky = _run(tmp_path / "leaky", users=120, **NOISED)
    for clients in (True, False):
        assert _audit(leaky, clients=clients).failed == ["NF-DP"]


def test_the_decoders_round_zero_model_is_exact(tmp_path):
    """What the decoder assumes the server has: round 0's clean uploads are exactly x_i A_i with
    A_i from the run seed alone (W^(0) and the user's dropout mask)."""
    from secure_fedgraph.audit.attacks.base import AttackContext
    from secure_fedgraph.audit.attacks.nfedgnn import round_zero_matrix
    from secure_fedgraph.audit.replay import load_run

    run = _run(tmp_path / "run", users=40, **NOISED, seed=7, user_randomness="run_seed")
    view = load_run(run / "transcript.bin", client_transcripts(run))
    context = AttackContext(view, data_dir=PLANETOID_DIR)
    for upload in (u for u in view.uploads if u.round == 0):
        clean = view.raw_upload(upload)
        x = context.client_data(upload.client).astype(np.float64)
        expected = x @ round_zero_matrix(context.plan, upload.client, x.size)
        np.testing.assert_allclose(np.concatenate([clean["h_eval"][0], clean["h"][0]]), expected, rtol=1e-5, atol=1e-8)
        assert not np.allclose(upload.tensors["h"][0], clean["h"][0])  # the server's copy is noised


def test_dp_noise_stops_word_recovery_and_link_inference_from_the_latents(tmp_path, monkeypatch):
    """Against a server that knows W^(0) (the users drew it from the run seed, NF-INIT's weaker
    opt-in), run sigma 1 (clip 0.05) and audit it with the attacks. The decoder's top-k words are no
    better than the public slice's most frequent words and the latents' similarity tells edges
    from non-edges no better than a coin, while the same attacks on the clean latents (the
    client transcripts) do clearly better; with the DP hook switched off, both succeed on the
    uploads themselves."""
    runs = iter(("dp", "off"))
    found = []

    def attack() -> bool:
        report = _audit(_run(tmp_path / next(runs), **NOISED, user_randomness="run_seed"), attacks=True)
        words, links = (next(a for a in report.attacks if a.name == name) for name in ("words of x_i recovered from h_i", "link inference from h_i"))
        found.append((words, links))
        return words.errors["attack on the uploads"] > 1.3 * words.errors[GUESS] or links.errors["attack on the uploads"] > 0.7

    defence_stops(attack, monkeypatch, NFedGNN, "privacy_hook", lambda self, ctx: None)
    (words, links), (open_words, open_links) = found
    assert words.errors["attack on the uploads"] < 1.1 * words.errors[GUESS], words.summary
    assert words.errors["no-DP reference (clean h_i)"] > 1.3 * words.errors[GUESS], words.summary
    assert open_words.errors["attack on the uploads"] > 1.3 * open_words.errors[GUESS], open_words.summary
    assert 0 < words.details["epsilon"] < 30 and words.details["public_clients"] == USERS // 4
    assert links.errors["attack on the uploads"] < 0.62 and links.errors["no-DP reference (clean h_i)"] > 0.7, links.summary
    assert open_links.errors["attack on the uploads"] > 0.7 and links.details["edges"] == 134, open_links.summary


def test_private_randomness_stops_word_recovery_without_any_noise(tmp_path, monkeypatch):
    """NF-INIT: no DP at all. With the users' own W^(0) and masks (the default) the decoder's
    words are no better than the public slice's most frequent words, and the audit says its A_i
    is a guess; with the users drawing them from the run seed, the decoder recovers words."""
    runs = iter(("private", "seeded"))
    found = []

    def attack() -> bool:
        report = _audit(_run(tmp_path / next(runs)), attacks=True)
        found.append(next(a for a in report.attacks if a.name == "words of x_i recovered from h_i"))
        return found[-1].errors["attack on the uploads"] > 1.3 * found[-1].errors[GUESS]

    defence_stops(attack, monkeypatch, NFedGNN, "seeded_randomness", property(lambda self: True))
    private, seeded = found
    assert private.errors["attack on the uploads"] < 1.1 * private.errors[GUESS], private.summary
    assert "NF-INIT" in private.summary and "NF-INIT" not in seeded.summary


def test_a_run_recorded_before_user_randomness_existed_is_audited_as_seeded():
    """Welcomes from before the option did not name it, and those users drew from the run seed:
    the audit must rebuild that plan (its decoder's A_i is then exact), not today's default."""
    from types import SimpleNamespace

    from secure_fedgraph.audit.replay import run_plan

    def view(config: dict) -> SimpleNamespace:
        return SimpleNamespace(plan="nfedgnn", cache={}, config={"plan": {"plan": "nfedgnn", "config": config}})

    today = json.loads(NFedGNN(NFedGNNConfig()).config_json())["config"]
    old = {k: v for k, v in today.items() if k != "user_randomness"}
    assert run_plan(view(old)).seeded_randomness
    assert not run_plan(view(today)).seeded_randomness


def test_the_audits_attacks_say_which_of_how_many_runs_and_for_how_long(tmp_path, monkeypatch):
    """An attack trains models for minutes: the audit names each (i of n) and, while it runs, says
    so with its seconds (audit/run.py, ATTACK_TICK_S)."""
    from secure_fedgraph.audit import run as audit_run

    monkeypatch.setattr(audit_run, "ATTACK_TICK_S", 0.01)
    folder = _run(tmp_path / "run", users=120)
    said: list[str] = []
    audit(folder, client_transcripts(folder), data_dir=PLANETOID_DIR, attacks=True, say=said.append)
    named = [line for line in said if line.startswith("audit: running the attack")]
    assert named and named[0].endswith(f"(1 of {len(named)})") and named[-1].endswith(f"({len(named)} of {len(named)})")
    assert any(line.startswith("audit: the attack '") and line.endswith(" s") and " runs, " in line for line in said), said
