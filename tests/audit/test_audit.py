"""The audit (secure_fedgraph/audit/): every claim checked from a run's transcripts, in both
modes (the server's transcript alone; with the clients'), against real in-process runs that
write every party's transcript; leaky settings make the right claim FAIL."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re

import numpy as np
import pytest

from secure_fedgraph.audit import Verdict, audit, write_report
from secure_fedgraph.audit.findings import CHECKERS, NOT_IN_TRANSCRIPTS
from secure_fedgraph.papers.cnfgnn import CNFGNN, CNFGNNConfig
from secure_fedgraph.papers.fedavg import FedAvgGRU, FedAvgGRUConfig
from secure_fedgraph.papers.synthetic import FedAvgVector, FedAvgVectorConfig
from secure_fedgraph.privacy import GaussianRows
from secure_fedgraph.protocol.core.crash_point import CrashPoint
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.runs.simulate import simulate
from tests.helpers import HZMETRO_DIR, client_transcripts, needs_hzmetro

ROOT = pathlib.Path(__file__).resolve().parents[2]
CNFGNN_TINY = dict(sensors=8, hidden_size=8, gn_hidden=16, gn_update=8, max_windows=40, batch_size=16, server_batch_size=12, rounds=1)


def _verdicts(report) -> dict[str, Verdict]:
    return {f.claim: f.verdict for f in report.findings}


def test_every_threat_model_claim_is_checked_or_said_to_be_out_of_a_transcripts_reach():
    text = (ROOT / "threat_model.md").read_text()
    claims = set(re.findall(r"^\| ([A-Z]+-[A-Z-]+) \|", text, flags=re.M))
    checked = set(CHECKERS) | {"R-AUDIT"}
    assert not checked & set(NOT_IN_TRANSCRIPTS)
    assert checked | set(NOT_IN_TRANSCRIPTS) == claims


@pytest.fixture(scope="module")
def rekeyed(tmp_path_factory):
    """FedAvg of 6 sensors (mask), client 3 silent at the second sum's input and client 4 at the
    pair seeds that follow (4 cannot reveal its seed with 3): a re-key, and the sum asked again
    of the four others."""
    run = tmp_path_factory.mktemp("rekeyed")
    plan = FedAvgGRU(FedAvgGRUConfig(sensors=6, rounds=1, hidden_size=8, max_windows=40, max_local_steps=1, batch_size=16))
    simulate(plan, SecureSumConfig(backend=Backend.MASK), drop={CrashPoint(Stage.INPUT, 0, 2): {3}, CrashPoint(Stage.PAIR_SEEDS, 0): {4}},
             transcripts=run)
    return run


def test_a_mask_run_passes_and_lists_its_dropout_rekey_and_redone_sum(rekeyed):
    report = audit(rekeyed, client_transcripts(rekeyed), attacks=False)
    verdicts = _verdicts(report)
    assert report.passed, [(f.claim, f.evidence) for f in report.findings if not f.passed]
    for claim in ("M-UNIFORM", "M-NOPLAIN", "M-SUM", "M-DROPOUT", "M-BOTH", "M-ONCE", "M-RANGE", "R-AUDIT"):
        assert verdicts[claim] is Verdict.PASS, claim
    probe = report.finding("M-NOPLAIN").details
    assert probe["probe_contributions"] == 6 + 5 + 4 + 4 + 4 and probe["probe_found"] == probe["probe_found_run_wide"] == 0
    assert probe["probe_run_wide"] == probe["probe_contributions"]  # at most 8 per client are also searched for in all the client sent
    assert [(d["client"], d["stage"]) for d in report.dropouts] == [(3, "input"), (4, "pair_seeds")]
    assert [(r["rekeys"], r["participants"]) for r in report.rekeys] == [(1, [6, 4])]
    weights = [(s["status"], s["asked"], s["inputs"], s["contributors"], s["server_learned_sum"]) for s in report.sums if s["name"] == "weights"]
    assert weights == [("redone", 6, 5, 0, False), ("delivered", 4, 4, 4, True)]  # started, never delivered, then asked again


@pytest.fixture(scope="module")
def dropped_contributor(tmp_path_factory):
    """FedAvg of 6 sensors (mask), client 3 silent at the second sum's input: its neighbours
    reveal their pair seeds of that sum with it, and the key epoch goes on."""
    run = tmp_path_factory.mktemp("dropped_contributor")
    plan = FedAvgGRU(FedAvgGRUConfig(sensors=6, rounds=1, hidden_size=8, max_windows=40, max_local_steps=1, batch_size=16))
    simulate(plan, SecureSumConfig(backend=Backend.MASK), drop={CrashPoint(Stage.INPUT, 0, 2): {3}}, transcripts=run)
    return run


def test_a_contributor_dropping_later_in_the_key_epoch_is_audited_without_a_rekey(dropped_contributor):
    report = audit(dropped_contributor, client_transcripts(dropped_contributor), attacks=False)
    assert report.passed, [(f.claim, f.evidence) for f in report.findings if not f.passed]
    assert [(r["rekeys"], r["participants"]) for r in report.rekeys] == [(0, [6])]
    weights = [(s["status"], s["asked"], s["inputs"], s["contributors"]) for s in report.sums if s["name"] == "weights"]
    assert weights == [("delivered", 6, 5, 5)]
    assert "pair seeds revealed with 1 client-epochs" in report.finding("M-BOTH").evidence


@pytest.mark.parametrize("extra", ["a share of its seed", "its own self-mask key for that sum"])
def test_m_both_fails_where_pair_seeds_with_a_client_meet_its_seed_or_its_self_mask_key(dropped_contributor, monkeypatch, extra):
    """The pair-seed rules can fail: the transcript as replayed, plus one answer no honest client
    gives, shows the server held what opens client 3's input of the sum it was said to drop from."""
    from secure_fedgraph.audit import replay
    from secure_fedgraph.protocol.sum_backends import messages as sm

    load = replay.load_run

    def tampered(*args, **kwargs):
        view = load(*args, **kwargs)
        paired = next(r for r in view.reveals if isinstance(r.message, sm.PairSeedsResponse))
        header = paired.message.header
        message = sm.RecoverResponse(header, (sm.Share(3, bytes(36)),)) if extra.startswith("a share") else \
            sm.UnmaskResponse(header, bytes(32), ())
        view.reveals.append(replay.Reveal(paired.epoch, paired.sum_index, paired.client if extra.startswith("a share") else 3, message))
        return view

    monkeypatch.setattr("secure_fedgraph.audit.run.load_run", tampered)
    report = audit(dropped_contributor, attacks=False)
    said = "both their seed and pair seeds with them" if extra.startswith("a share") else "self-mask key for a sum and pair seeds"
    assert "M-BOTH" in report.failed and "clients [3]" in report.finding("M-BOTH").evidence and said in report.finding("M-BOTH").evidence


def test_server_only_mode_checks_what_the_server_alone_can(rekeyed):
    report = audit(rekeyed, attacks=False)
    verdicts = _verdicts(report)
    assert report.run["mode"] == "server-only" and report.passed
    assert verdicts["M-SUM"] is Verdict.NOT_APPLICABLE and "client" in report.finding("M-SUM").evidence
    assert verdicts["M-UNIFORM"] is Verdict.PASS and "not tested (no client audit records)" in report.finding("M-UNIFORM").evidence
    assert report.seen["clients"] == []


def test_a_wrong_aggregate_fails_m_sum(rekeyed, monkeypatch):
    """The sum check can fail: a delivered ring sum off by one unit in its last place is caught."""
    from secure_fedgraph.audit import replay

    load = replay.load_run

    def tampered(*args, **kwargs):
        view = load(*args, **kwargs)
        attempt = next(a for a in view.sums if a.name == "weights" and a.deliver is not None)
        aggregate = attempt.deliver.aggregate.copy()
        aggregate[0] += np.uint64(1 << 30)
        attempt.deliver = dataclasses.replace(attempt.deliver, aggregate=aggregate)
        return view

    monkeypatch.setattr("secure_fedgraph.audit.run.load_run", tampered)
    report = audit(rekeyed, client_transcripts(rekeyed), attacks=False)
    assert report.failed == ["M-SUM", "R-AUDIT"] and "weights (round 0)" in report.finding("M-SUM").evidence


@pytest.mark.parametrize("backend,failing", [("plain", ["M-UNIFORM", "M-NOPLAIN"]), ("mask", []), ("ckks", [])])
def test_the_plain_backend_fails_the_secrecy_claims_and_the_secure_ones_pass(backend, failing, tmp_path):
    """The leaky setting the audit must catch: with plain the probe finds every client's input in
    what the server received (P-CLEAR, as stated), so M-NOPLAIN fails; mask and ckks pass."""
    plan = FedAvgVector(FedAvgVectorConfig(clients=4, length=64, rounds=1))
    simulate(plan, SecureSumConfig(backend=Backend(backend)), transcripts=tmp_path)
    report = audit(tmp_path, client_transcripts(tmp_path), attacks=False)
    assert report.failed == failing, [(f.claim, f.evidence) for f in report.findings]
    probe = report.finding("M-NOPLAIN").details
    assert probe["probe_found"] == (probe["probe_contributions"] if backend == "plain" else 0) and probe["probe_contributions"] > 0
    assert probe["probe_found_run_wide"] == (probe["probe_run_wide"] if backend == "plain" else 0) and probe["probe_run_wide"] > 0
    if backend == "plain":
        assert report.finding("P-CLEAR").verdict is Verdict.PASS
    if backend == "ckks":
        assert report.finding("C-PUBLIC").verdict is Verdict.PASS and report.finding("M-UNIFORM").verdict is Verdict.NOT_APPLICABLE


def _cnfgnn_run(folder: pathlib.Path, **overrides) -> pathlib.Path:
    result = simulate(CNFGNN(CNFGNNConfig(**{**CNFGNN_TINY, **overrides})), SecureSumConfig(backend=Backend.MASK), transcripts=folder)
    (folder / "metrics.json").write_text(json.dumps(result.metrics, default=str))
    return folder


def test_dp_noise_is_checked_from_both_sides_and_a_client_skipping_it_fails_dp_client(tmp_path, monkeypatch):
    """DP on (sigma 1): the residuals match sigma * clip (with client transcripts) and the rows'
    norms carry the noise (server-only). A client whose DP hook only clips while the run claims
    sigma 1 (DP off while the claim says on): DP-CLIENT fails in both modes."""
    noised = _cnfgnn_run(tmp_path / "noised", dp_sigma=1.0)
    for clients in (client_transcripts(noised), []):
        report = audit(noised, clients, attacks=False)
        assert report.finding("DP-CLIENT").verdict is Verdict.PASS, report.finding("DP-CLIENT").evidence
        assert report.finding("SL-NORAW").verdict is Verdict.PASS and report.passed
        assert report.finding("DP-ACCOUNT").verdict is Verdict.PASS, report.finding("DP-ACCOUNT").evidence
    assert report.finding("DP-UNIT").verdict is Verdict.PASS and "not noised" in report.finding("DP-UNIT").evidence

    from secure_fedgraph.privacy.mechanisms.gaussian import clip_rows

    monkeypatch.setattr(GaussianRows, "__call__", lambda self, tensors: {k: clip_rows(np.asarray(v), self.clip)[0] for k, v in tensors.items()})
    leaky = _cnfgnn_run(tmp_path / "leaky", dp_sigma=1.0)
    for clients in (client_transcripts(leaky), []):
        report = audit(leaky, clients, attacks=False)
        assert report.failed == ["DP-CLIENT"], [(f.claim, f.evidence) for f in report.findings if not f.passed]


def test_write_report_gives_markdown_json_and_figures(rekeyed, tmp_path):
    import json

    report = audit(rekeyed, client_transcripts(rekeyed), attacks=False)
    paths = write_report(report, tmp_path / "out")
    data = json.loads(paths["json"].read_text())
    assert data["passed"] is True and {c["claim"] for c in data["claims"]} == set(CHECKERS) | {"R-AUDIT"}
    assert set(data["not_in_transcripts"]) == set(NOT_IN_TRANSCRIPTS)
    markdown = paths["md"].read_text()
    assert "| M-SUM | PASS |" in markdown and "## Sums the server started" in markdown and "| 0 | 3 | 0 | input | silent |" in markdown
    for name in ("m-uniform-uniformity.png", "sums.png"):
        assert (tmp_path / "out" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"]({name})" in markdown


@needs_hzmetro
@pytest.mark.parametrize("backend", ["plain", "mask"])
def test_fedstgd_sums_are_audited_and_plain_fails_st_sums(backend, tmp_path):
    """FedSTGD's P/Q sums (streaming with mask): ST-SUMS and M-STREAM pass with mask; with plain
    the server holds every client's P/Q terms, so ST-SUMS fails."""
    from secure_fedgraph.papers.fedstgd import FedSTGD, FedSTGDConfig

    config = FedSTGDConfig(clients=3, rounds=1, hidden=8, node_dim=8, time_dim=8, embed_rank=2, max_windows=16, batch_size=8, eval_batch_size=16)
    simulate(FedSTGD(config), SecureSumConfig(backend=Backend(backend)), data_dir=HZMETRO_DIR, transcripts=tmp_path)
    report = audit(tmp_path, client_transcripts(tmp_path), attacks=False)
    if backend == "plain":
        assert "ST-SUMS" in report.failed and "M-NOPLAIN" in report.failed
    else:
        assert report.passed and report.finding("ST-SUMS").verdict is Verdict.PASS
        assert report.finding("M-STREAM").verdict is Verdict.PASS and sum(s["streaming"] for s in report.sums) > 0


@needs_hzmetro
def test_a_fedstgd_run_with_distributed_dp_is_audited_against_its_one_epsilon(tmp_path):
    """FedSTGD with ddp_noise: every sum of the windows carries the announced multiplier over
    its own bound, and against the clients' records the noise in what the server holds has the
    stated size (DDP-NOISE); DDP-ACCOUNT recomputes the run's one epsilon from the noised sums
    and the DP-SGD reports the transcript shows (papers/fedstgd_budget.py), which DP-ACCOUNT
    leaves to it. A report claiming less than that fails DDP-ACCOUNT."""
    from secure_fedgraph.papers.fedstgd import FedSTGD, FedSTGDConfig

    config = FedSTGDConfig(clients=3, rounds=1, hidden=8, node_dim=8, time_dim=8, embed_rank=2, max_windows=8, batch_size=8, eval_batch_size=8,
                           dpsgd_sigma=2.0, ddp_noise=2.0)
    metrics = simulate(FedSTGD(config), SecureSumConfig(), data_dir=HZMETRO_DIR, transcripts=tmp_path).metrics
    (tmp_path / "metrics.json").write_text(json.dumps(metrics, default=str))
    report = audit(tmp_path, client_transcripts(tmp_path), attacks=False)
    assert report.passed, [(f.claim, f.evidence) for f in report.findings if not f.passed]
    assert report.finding("DDP-NOISE").verdict is Verdict.PASS and "pq-grad 0.0001" in report.finding("DDP-NOISE").evidence
    assert report.finding("DDP-NOISE").details["sums"] == 67  # normalisation, 16 + 16 training, 16 + 16 evaluation P/Q, 2 error sums
    assert report.finding("DDP-ACCOUNT").details["epsilon"] == pytest.approx(metrics["privacy"]["epsilon_max"], rel=1e-12)
    assert report.finding("DP-ACCOUNT").verdict is Verdict.NOT_APPLICABLE and report.finding("DP-SGD").verdict is Verdict.PASS
    metrics["privacy"]["epsilon_max"] /= 2
    (tmp_path / "metrics.json").write_text(json.dumps(metrics, default=str))
    assert audit(tmp_path, [], attacks=False).failed == ["DDP-ACCOUNT"]


def test_with_ckks_the_server_learns_only_the_released_sums_and_they_equal_the_plaintext_sums(tmp_path):
    plan = FedAvgGRU(FedAvgGRUConfig(sensors=4, rounds=1, hidden_size=8, max_windows=30, max_local_steps=1, batch_size=16))
    simulate(plan, SecureSumConfig(backend=Backend.CKKS), transcripts=tmp_path)
    report = audit(tmp_path, client_transcripts(tmp_path), attacks=False)
    assert report.passed and report.finding("C-SUM").verdict is Verdict.PASS and report.finding("C-SUM").details["sums"] == 2
    assert {s["name"]: s["server_learned_sum"] for s in report.sums} == {"normalisation": False, "weights": False, "validation": True, "test": True}


def test_distributed_dp_is_audited_and_a_client_skipping_its_noise_fails_ddp_noise(tmp_path, monkeypatch):
    """fedavg-vector with distributed DP over plain (the server sees each noisy input): the noise
    in each input has the stated variance (DDP-NOISE) and the run's epsilon is the one the noise
    ledger recomputes from the transcript's noised sums (DDP-ACCOUNT); over mask the ring covers
    the noise's tail (DDP-RANGE). Clients that only clip and round while the sums announce noise
    fail DDP-NOISE."""
    from secure_fedgraph.protocol.sum_backends import roles
    from secure_fedgraph.protocol.sum_backends.ddp_noise import clipped

    def run(folder: pathlib.Path, backend: str) -> pathlib.Path:
        result = simulate(FedAvgVector(FedAvgVectorConfig(clients=4, length=400, rounds=1, ddp_noise=2.0, ddp_clip=0.5)),
                          SecureSumConfig(backend=Backend(backend)), transcripts=folder)
        (folder / "metrics.json").write_text(json.dumps(result.metrics, default=str))
        return folder

    for backend in ("plain", "mask"):
        report = audit(run(tmp_path / backend, backend), client_transcripts(tmp_path / backend), attacks=False)
        for claim in ("DDP-NOISE", "DDP-ACCOUNT", *(("DDP-RANGE",) if backend == "mask" else ())):
            assert report.finding(claim).verdict is Verdict.PASS, (claim, report.finding(claim).evidence)
        measured = report.finding("DDP-NOISE").details.get("largest_relative_deviation")
        assert (measured is not None) == (backend == "plain")  # mask's sums here stay in the server: only the specs are checked

    monkeypatch.setattr(roles, "noised", lambda x, spec, *, precision_bits: np.rint(clipped(x, spec) * 2.0**precision_bits)
                        / 2.0**precision_bits)
    report = audit(run(tmp_path / "leaky", "plain"), client_transcripts(tmp_path / "leaky"), attacks=False)
    assert report.finding("DDP-NOISE").verdict is Verdict.FAIL, report.finding("DDP-NOISE").evidence


def test_distributed_dp_is_audited_and_a_server_asking_no_noise_fails_ddp_noise(tmp_path, monkeypatch):
    """fedavg-vector with distributed DP (multiplier 1): every round's model sum asked for the
    plan's noise (DDP-NOISE) and the epsilon recomputed from the noised sums and their
    contributors equals the run's report (DDP-ACCOUNT). A report claiming less epsilon fails
    DDP-ACCOUNT; a server that asks for no noise while the plan says 1 fails DDP-NOISE."""
    import json

    from secure_fedgraph.protocol.engine.contexts import ServerContext

    plan = FedAvgVector(FedAvgVectorConfig(clients=4, length=64, rounds=2, ddp_noise=1.0))
    noised = tmp_path / "noised"
    metrics = simulate(plan, SecureSumConfig(backend=Backend.MASK), transcripts=noised).metrics
    (noised / "metrics.json").write_text(json.dumps(metrics, default=str))
    report = audit(noised, [], attacks=False)
    assert report.passed and report.finding("DDP-NOISE").verdict is Verdict.PASS, report.finding("DDP-NOISE").evidence
    assert report.finding("DDP-ACCOUNT").verdict is Verdict.PASS and report.finding("DDP-ACCOUNT").details["epsilon"] == metrics["privacy"]["epsilon_max"]

    metrics["privacy"]["epsilon_max"] /= 2  # a report that understates what the sums spent
    (noised / "metrics.json").write_text(json.dumps(metrics, default=str))
    assert audit(noised, [], attacks=False).failed == ["DDP-ACCOUNT"]

    monkeypatch.setattr(ServerContext, "sum_noise", lambda self, **kw: None)  # the server asks for no noise
    bare = tmp_path / "bare"
    simulate(plan, SecureSumConfig(backend=Backend.MASK), transcripts=bare)
    report = audit(bare, [], attacks=False)
    assert report.failed == ["DDP-NOISE"], [(f.claim, f.evidence) for f in report.findings if not f.passed]


@pytest.mark.parametrize("overrides", [dict(dp_sigma=1.0, dp_unit="reading"), dict(dp_sigma=1.0, variant="sl", rounds=2),
                                       dict(dp_sigma=2.0, dpsgd_sigma=1.0)], ids=["reading-unit", "split-learning", "with-dp-sgd"])
def test_dp_account_recomputes_the_runs_epsilon_for_its_unit_variant_and_dp_sgd(overrides, tmp_path, monkeypatch):
    """DP-ACCOUNT rebuilds the accountant from the transcript (every row of each h_c upload;
    split learning's batches from the shared order; the clients' DP-SGD reports) for the run's
    privacy unit and matches the run's epsilon; a report that understates it fails. With DP-SGD,
    a client reporting less noise than announced fails DP-SGD."""
    run = _cnfgnn_run(tmp_path / "run", **overrides)
    report = audit(run, [], attacks=False)
    assert report.passed and report.finding("DP-ACCOUNT").verdict is Verdict.PASS, report.finding("DP-ACCOUNT").evidence
    metrics = json.loads((run / "metrics.json").read_text())
    assert report.finding("DP-ACCOUNT").details["epsilon"] == pytest.approx(metrics["privacy"]["epsilon_max"], rel=1e-9)
    metrics["privacy"]["epsilon_max"] /= 2
    (run / "metrics.json").write_text(json.dumps(metrics))
    assert audit(run, [], attacks=False).failed == ["DP-ACCOUNT"]
    if "dpsgd_sigma" in overrides:
        assert report.finding("DP-SGD").verdict is Verdict.PASS
        from secure_fedgraph.protocol.engine.contexts import ClientContext

        honest = ClientContext.report_privacy
        monkeypatch.setattr(ClientContext, "report_privacy", lambda self: dataclasses.replace(
            honest(self), tensors={"steps": honest(self).tensors["steps"] * np.array([0.5, 1, 1, 1])}))
        assert "DP-SGD" in audit(_cnfgnn_run(tmp_path / "low", **overrides), [], attacks=False).failed


@needs_hzmetro
def test_a_fedstgd_run_with_dpsgd_passes_and_its_dpsgd_reports_are_its_only_individual_uploads(tmp_path):
    """With DP-SGD every FedSTGD client reports its count (sigma, rate, releases, sensitivity)
    outside the sums: ST-SUMS passes and names them; DP-SGD and DP-ACCOUNT (priced at the
    reported sensitivity, 2 sqrt(3) clips for 3 clients) pass with the run's epsilon."""
    from secure_fedgraph.papers.fedstgd import FedSTGD, FedSTGDConfig

    config = FedSTGDConfig(clients=3, rounds=1, hidden=8, node_dim=8, time_dim=8, embed_rank=2, max_windows=16, batch_size=8, eval_batch_size=16,
                           dpsgd_sigma=3.0)
    metrics = simulate(FedSTGD(config), SecureSumConfig(backend=Backend.MASK), data_dir=HZMETRO_DIR, transcripts=tmp_path).metrics
    (tmp_path / "metrics.json").write_text(json.dumps(metrics, default=str))
    report = audit(tmp_path, client_transcripts(tmp_path), attacks=False)
    assert report.passed, [(f.claim, f.evidence) for f in report.findings if not f.passed]
    assert "3 DP-SGD reports" in report.finding("ST-SUMS").evidence
    assert report.finding("DP-SGD").verdict is Verdict.PASS
    assert report.finding("DP-ACCOUNT").details["epsilon"] == pytest.approx(metrics["privacy"]["epsilon_max"], rel=1e-9)
