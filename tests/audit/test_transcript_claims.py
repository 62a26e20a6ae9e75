"""The audit against a deviating server (secure_fedgraph/audit/transcript_claims.py): with the
clients' transcripts, every message each client received and sent is compared with the server's
record of it, byte for byte (R-TRANSCRIPT), and a mismatch fails the claims judged on what the
server's transcript shows; from the server's transcript alone, C-CHECK recomputes every ckks
delivery and C-CONSISTENCY / M-CONSISTENCY find clients shown different sets."""

from __future__ import annotations

import dataclasses
import json
import pathlib

import numpy as np
import pytest

from secure_fedgraph.audit import Verdict, audit, write_report
from secure_fedgraph.audit.findings import SERVER_ONLY, WITH_CLIENTS
from secure_fedgraph.papers.fedavg import FedAvgGRU, FedAvgGRUConfig
from secure_fedgraph.papers.synthetic import FedAvgVector, FedAvgVectorConfig
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.core.crash_point import CrashPoint
from secure_fedgraph.protocol.engine.contexts import RELEASE_PREFIX
from secure_fedgraph.protocol.core.messages import UploadRequest, UploadResponse, tensors_of
from secure_fedgraph.protocol.sum_backends import Backend, ClientPolicy, SecureSumConfig
from secure_fedgraph.protocol.sum_backends import messages as sm
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.protocol.transports.transcript import AUDIT, RECEIVED, SENT, Record, TranscriptWriter, read_transcript
from secure_fedgraph.runs import simulate as simulate_module
from secure_fedgraph.runs.simulate import simulate
from tests.helpers import client_transcripts, defence_stops, splicing_ckks_server

CKKS = SecureSumConfig(backend=Backend.CKKS)
CKKS_ONLY = ClientPolicy(backends=frozenset({Backend.CKKS}))
TINY_GRU = dict(sensors=4, hidden_size=8, max_windows=30, max_local_steps=1, batch_size=16)


def _rewrite(path: pathlib.Path, change) -> None:
    """A server editing its own transcript: ``change(record, message)`` gives the records (as
    (direction, peer, bytes)) to write in place of each one."""
    records = [(r, r.message()) for r in read_transcript(path)]
    path.unlink()
    writer = TranscriptWriter(path)
    for record, message in records:
        for direction, peer, data in change(record, message):
            writer.record(direction, peer, data, at=record.time)
    writer.close()


def _keep(record: Record, message) -> list:
    return [(record.direction, record.peer, record.data)]


@pytest.fixture(scope="module")
def honest_ckks(tmp_path_factory):
    run = tmp_path_factory.mktemp("honest-ckks")
    simulate(FedAvgGRU(FedAvgGRUConfig(rounds=2, **TINY_GRU)), CKKS, policy=CKKS_ONLY, transcripts=run)
    return run


def test_an_honest_run_matches_every_client_transcript_and_says_what_each_claim_was_checked_from(honest_ckks, tmp_path):
    report = audit(honest_ckks, client_transcripts(honest_ckks), attacks=False)
    assert report.passed, [(f.claim, f.evidence) for f in report.findings if not f.passed]
    wire = report.finding("R-TRANSCRIPT")
    assert wire.verdict is Verdict.PASS and wire.details["clients"] == 4 and wire.details["compared"] > 100 and wire.details["unconfirmed"] == 0
    for claim in ("C-CHECK", "C-CONSISTENCY", "C-SUM", "R-AUDIT"):
        assert report.finding(claim).verdict is Verdict.PASS and report.finding(claim).basis == WITH_CLIENTS, claim
    assert report.finding("C-PUBLIC").basis == WITH_CLIENTS  # key set-ups are among what the comparison covers
    assert "the ciphertext sum of one input of each" in report.finding("C-CHECK").evidence

    alone = audit(honest_ckks, attacks=False)
    assert alone.passed and alone.finding("R-TRANSCRIPT").verdict is Verdict.NOT_APPLICABLE
    assert alone.finding("C-CHECK").basis == SERVER_ONLY and "needs their transcripts" in alone.finding("C-CHECK").evidence
    assert {f.basis for f in alone.findings} == {SERVER_ONLY, ""}
    paths = write_report(alone, tmp_path / "alone")
    text = paths["md"].read_text()
    assert "| claim | verdict | checked from | evidence |" in text and f"| C-CHECK | PASS | {SERVER_ONLY} |" in text
    assert "## What the server's transcript alone cannot show" in text and "no client transcripts" in text
    claims = {c["claim"]: c for c in json.loads(paths["json"].read_text())["claims"]}
    assert claims["C-CHECK"]["checked_from"] == SERVER_ONLY and claims["R-TRANSCRIPT"]["checked_from"] is None


def test_a_resumed_mask_run_matches_in_both_sessions(tmp_path):
    """Two sessions (the server restarts at round 1's unmask step): every client's messages of
    both match the server's transcript."""
    simulate(FedAvgGRU(FedAvgGRUConfig(rounds=2, **TINY_GRU)), SecureSumConfig(backend=Backend.MASK), restart_at=CrashPoint(Stage.UNMASK, 1),
             transcripts=tmp_path)
    report = audit(tmp_path, client_transcripts(tmp_path), attacks=False)
    assert report.passed and report.run["sessions"] == 2, [(f.claim, f.evidence) for f in report.findings if not f.passed]
    assert report.finding("R-TRANSCRIPT").verdict is Verdict.PASS and report.finding("M-CONSISTENCY").verdict is Verdict.PASS


def _e2_run(folder: pathlib.Path, monkeypatch) -> tuple[pathlib.Path, object]:
    """Attack E2 on fedavg-gru, by clients without the advance check (threat_model.md C-CHECK):
    round 1's validation sum is round 0's ciphertexts without sensor 3, released."""
    from secure_fedgraph.protocol.sum_backends.ckks import CkksClient

    made = []

    def server(config, **kwargs):
        made.append(splicing_ckks_server("validation", 3)(config, **kwargs))
        return made[-1]

    with monkeypatch.context() as before_the_fix:
        before_the_fix.setattr(CkksClient, "_advance", lambda self, round_index, sum_index: None)
        before_the_fix.setattr(simulate_module, "make_server", server)
        simulate(FedAvgGRU(FedAvgGRUConfig(rounds=2, **TINY_GRU)), CKKS, policy=CKKS_ONLY, transcripts=folder)
    releases = [tensors_of(r.message().tensors) for r in read_transcript(folder / "transcript.bin")
                if r.direction == RECEIVED and r.peer == 0 and isinstance(r.message(), UploadResponse)
                and r.message().name == RELEASE_PREFIX + "validation"]
    own = next(tensors_of(r.message().tensors) for r in read_transcript(folder / "clients" / "client-3.bin")
               if r.direction == AUDIT and r.message().name == "validation")
    assert all(np.allclose(releases[0][k] - releases[1][k], own[k], rtol=1e-6, atol=1e-3) for k in own)  # the splice gave sensor 3 away
    return folder, made[0]


def _cover_up(run: pathlib.Path, splicer) -> None:
    """The transcript a deviating server writes after E2: the rounds after the first relabelled as
    an honest server labels them (round 1, sum indices from 0), the spliced delivery replaced by
    the sum of that round's own inputs (which the server can add up), and the release of the
    spliced sum left out. From the server's transcript alone it is an honest run."""
    from secure_fedgraph.crypto.ckks import PublicContext

    path = run / "transcript.bin"
    records = [(r, r.message()) for r in read_transcript(path)]
    later = [(r, m) for r, m in records if m.header is not None and m.header.step > splicer.relabelled_after]
    names = [m.spec.name for r, m in later if r.direction == SENT and isinstance(m, sm.InputRequest)]
    order = list(dict.fromkeys(names))
    index = {next(m.sum_index for r, m in later if isinstance(m, sm.InputRequest) and m.spec.name == name): i for i, name in enumerate(order)}
    context = PublicContext(next(m.public_context for r, m in records if isinstance(m, sm.KeyDealResponse)))
    inputs_at = {}  # (sum index) -> client -> ciphertexts of that round's inputs
    step_of = {}
    for r, m in later:
        if isinstance(m, sm.InputRequest):
            step_of[m.sum_index] = m.header.step
        if isinstance(m, sm.InputResponse):
            inputs_at.setdefault(m.header.step, {})[r.peer] = m.ciphertexts
    hidden = {m.header.step for r, m in later if isinstance(m, UploadRequest) and m.name == RELEASE_PREFIX + "validation"}

    def honest(record: Record, message) -> list:
        header = getattr(message, "header", None)
        if header is None or header.step <= splicer.relabelled_after:
            return _keep(record, message)
        if header.step in hidden:
            return []
        changes = {"header": dataclasses.replace(header, round=1)}
        if isinstance(message, sm.InputRequest | sm.DeliverRequest):
            changes["sum_index"] = index[message.sum_index]
        if isinstance(message, sm.DeliverRequest):
            total = None
            for c in message.contributors:
                total = PublicContext.add(total, [context.load(b) for b in inputs_at[step_of[message.sum_index]][c]])
            changes["ciphertexts"] = tuple(v.serialize() for v in total)
        return [(record.direction, record.peer, codec.encode(dataclasses.replace(message, **changes)))]

    path.unlink()
    writer = TranscriptWriter(path)
    for record, message in records:
        for direction, peer, data in honest(record, message):
            writer.record(direction, peer, data, at=record.time)
    writer.close()


def test_a_server_hiding_a_splice_from_its_transcript_fails_the_audit_with_client_transcripts(tmp_path, monkeypatch):
    """Issue 29, item 7: a server that recovered sensor 3's validation totals through E2 and wrote
    the transcript of an honest run passed `secure-fedgraph audit` with every client's transcript,
    which the audit read only for the clients' plaintexts. Compared message by message with the
    clients', its transcript fails R-TRANSCRIPT, and the claims judged on the stages it rewrote
    fail with it (C-CHECK, C-CONSISTENCY, C-SUM, M-NOPLAIN; R-AUDIT). From its transcript alone it still
    passes: what the report says the server's transcript alone cannot show."""
    from secure_fedgraph.audit import replay

    run, splicer = _e2_run(tmp_path / "e2", monkeypatch)
    _cover_up(run, splicer)
    assert audit(run, attacks=False).passed  # server-only: the server's word

    def attack() -> bool:
        report = audit(run, client_transcripts(run), attacks=False)
        if not report.passed:
            assert sorted(report.failed) == ["C-CHECK", "C-CONSISTENCY", "C-SUM", "M-NOPLAIN", "R-AUDIT", "R-TRANSCRIPT"], report.failed
            wire = report.finding("R-TRANSCRIPT")
            assert {"deliver", "consistency", "input"} <= set(wire.details["stages"])
            assert "client 0, session 0" in wire.evidence and "the server's transcript shows a different message to the client" in wire.evidence
            assert "R-TRANSCRIPT" in report.finding("C-CHECK").evidence and "As judged: " in report.finding("C-CHECK").evidence
        return report.passed

    defence_stops(attack, monkeypatch, replay, "compare_wire", lambda client, places, view, wire: None)


def test_a_splice_left_in_the_servers_transcript_fails_c_check_from_that_transcript_alone(tmp_path, monkeypatch):
    """A transcript that shows the splice as it happened: round 1's validation delivery is not
    the sum of round 1's inputs (it is round 0's without sensor 3), which C-CHECK recomputes from
    the server's transcript alone."""
    run, _ = _e2_run(tmp_path / "e2", monkeypatch)
    report = audit(run, attacks=False)
    assert report.failed == ["C-CHECK", "R-AUDIT"], [(f.claim, f.evidence) for f in report.findings if not f.passed]
    assert "validation (session 0, round 0, sum 2) delivered ciphertexts that are not the sum of its contributors' inputs to it" \
        in report.finding("C-CHECK").evidence


@pytest.mark.parametrize("backend,claim", [("ckks", "C-CONSISTENCY"), ("mask", "M-CONSISTENCY")])
def test_clients_shown_different_sets_fail_the_consistency_claim_from_the_servers_transcript(backend, claim, tmp_path):
    """A server's transcript in which client 2 was asked to sign another set than the others
    (the two-sets attack, as its transcript shows it) fails C-CONSISTENCY / M-CONSISTENCY from
    the server's transcript alone; with the clients' transcripts, R-TRANSCRIPT fails too (client
    2 received the honest request, which the server's transcript no longer shows)."""
    simulate(FedAvgVector(FedAvgVectorConfig(clients=5, length=32, rounds=1)), SecureSumConfig(backend=Backend(backend)), transcripts=tmp_path)
    changed = []

    def two_sets(record: Record, message) -> list:
        if record.direction == SENT and record.peer == 2 and isinstance(message, sm.ConsistencyRequest) and not changed:
            changed.append(message.header.step)
            fewer = tuple(c for c in message.survivors if c != 4)
            return [(SENT, 2, codec.encode(dataclasses.replace(message, survivors=fewer)))]
        return _keep(record, message)

    _rewrite(tmp_path / "transcript.bin", two_sets)
    alone = audit(tmp_path, attacks=False)
    assert alone.failed == [claim, "R-AUDIT"], alone.failed
    assert f"session 0, step {changed[0]} (consistency)" in alone.finding(claim).evidence
    both = audit(tmp_path, client_transcripts(tmp_path), attacks=False)
    assert {claim, "R-TRANSCRIPT", "R-AUDIT"} <= set(both.failed)
    assert f"client 2, session 0, step {changed[0]} (consistency" in both.finding("R-TRANSCRIPT").evidence


@pytest.mark.parametrize("doctoring", ["answer-changed", "answer-invented", "answer-hidden", "request-hidden"])
def test_every_way_a_servers_transcript_can_differ_from_a_clients_fails_r_transcript(doctoring, honest_ckks, tmp_path):
    """The server's transcript changes what client 1 sent (its released validation totals), shows
    an answer client 1 never sent, leaves one out while it went on with that client, or leaves
    out a request client 1 received: each fails R-TRANSCRIPT, naming the client, the step and
    the stage."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(honest_ckks, run)
    done = []

    def doctor(record: Record, message) -> list:
        if done or record.peer != 1 or getattr(message, "header", None) is None:
            return _keep(record, message)
        release = isinstance(message, UploadResponse) and message.name == RELEASE_PREFIX + "validation"
        if doctoring == "answer-changed" and record.direction == RECEIVED and release:
            done.append(message.header.step)
            tensors = {k: v + 1.0 for k, v in tensors_of(message.tensors).items()}
            from secure_fedgraph.protocol.core.messages import named

            return [(RECEIVED, 1, codec.encode(dataclasses.replace(message, tensors=named(tensors))))]
        if doctoring == "answer-invented" and record.direction == RECEIVED and release:
            done.append(message.header.step)
            later = dataclasses.replace(message, header=dataclasses.replace(message.header, step=message.header.step + 10**6))
            return [_keep(record, message)[0], (RECEIVED, 1, codec.encode(later))]
        if doctoring == "answer-hidden" and record.direction == RECEIVED and release:
            done.append(message.header.step)
            return []
        if doctoring == "request-hidden" and record.direction == SENT and isinstance(message, sm.DeliverRequest):
            done.append(message.header.step)
            return []
        return _keep(record, message)

    _rewrite(run / "transcript.bin", doctor)
    report = audit(run, client_transcripts(run), attacks=False)
    wire = report.finding("R-TRANSCRIPT")
    step = done[0] + (10**6 if doctoring == "answer-invented" else 0)
    assert wire.verdict is Verdict.FAIL and wire.details["mismatched"] == 1, wire.evidence
    stage = {"request-hidden": "deliver", "answer-invented": "upload"}.get(doctoring, "upload: UploadResponse release:validation")
    assert f"client 1, session 0, step {step} ({stage}" in wire.evidence, wire.evidence
    assert "R-AUDIT" in report.failed


def test_what_a_server_killed_mid_step_never_wrote_is_not_compared_but_an_earlier_gap_fails(tmp_path):
    """A server's transcript of a session that stops in the middle of a step, with no End (a
    killed server): the clients' messages of that last step are counted as unconfirmed, not
    failed. The same gap one step earlier, with later steps recorded, fails R-TRANSCRIPT."""
    simulate(FedAvgGRU(FedAvgGRUConfig(rounds=2, **TINY_GRU)), SecureSumConfig(backend=Backend.MASK), restart_at=CrashPoint(Stage.UNMASK, 1),
             transcripts=tmp_path)
    path = tmp_path / "transcript.bin"
    first = next(r.message().header.session for r in read_transcript(path)  # the first session, not the proposal that opened it
                 if r.message().header.stage not in (Stage.WELCOME, Stage.SESSION))
    steps = sorted({r.message().header.step for r in read_transcript(path) if r.message().header.session == first})
    original = path.read_bytes()
    for lost, unconfirmed in ((steps[-1], True), (steps[-2], False)):
        path.write_bytes(original)
        _rewrite(path, lambda record, message: [] if message.header.session == first and message.header.step == lost else _keep(record, message))
        wire = audit(tmp_path, client_transcripts(tmp_path), attacks=False).finding("R-TRANSCRIPT")
        if unconfirmed:
            assert wire.verdict is Verdict.PASS and wire.details["unconfirmed"] > 0 and "not compared" in wire.evidence, wire.evidence
        else:
            assert wire.verdict is Verdict.FAIL and f"session 0, step {lost}" in wire.evidence, wire.evidence
