"""Server restart across real processes (issue 14, item 5): the server process is killed
mid-round, ``server --resume RUN`` starts on the same port, the same client processes reconnect
on their own, and the run finishes with the numbers of an uninterrupted run."""

from __future__ import annotations

import json
import signal

import pytest

from secure_fedgraph.audit import Verdict
from secure_fedgraph.audit import audit as audit_transcripts
from secure_fedgraph.crypto.pki import init_keys
from secure_fedgraph.papers import FedAvgGRU
from secure_fedgraph.papers.fedavg import FedAvgGRUConfig
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig
from secure_fedgraph.runs.launch import start_server
from secure_fedgraph.runs.simulate import simulate

TINY = {"rounds": 3, "hidden_size": 8, "max_windows": 40, "max_local_steps": 2, "batch_size": 16}


def test_a_server_killed_mid_round_resumes_and_the_run_equals_an_uninterrupted_one(tmp_path):
    """SIGKILL on entering round 1's unmask step (the clients had signed that round's FedAvg sum,
    so the resumed session asks them for it again, over the same clients); the resumed run
    finishes every round and its numbers equal an uninterrupted run's bit for bit (mask)."""
    keys, run = init_keys(tmp_path / "keys", clients=5).root, tmp_path / "run"
    timeouts = ("--join-timeout", "60", "--step-timeout", "60")
    plan_options = [a for k, v in TINY.items() for a in ("--set", f"{k}={v}")]
    first = start_server(tmp_path / "first", "--plan", "fedavg-gru", "--clients", "5", *plan_options, *timeouts, "--crash-at", "unmask@1",
                         "--transcript", certs=keys, out=run)
    audit = ("--transcript", str(tmp_path / "clients"), "--audit")
    clients = [first.client("0-2", *audit), first.client("3-4", *audit)]
    second = None
    try:
        assert first.server.wait(timeout=240) == -signal.SIGKILL
        assert json.loads((run / "checkpoint.json").read_text())["round"] == 1
        second = start_server(tmp_path / "second", "--resume", str(run), *timeouts, "--transcript", certs=keys, out=run, port=first.port)
        output = second.wait(timeout=240)
        said = [process.communicate(timeout=60)[0] for process in clients]
    finally:
        for launched in (first, second):
            if launched is not None:
                launched.stop(grace_s=1.0)
    assert [process.returncode for process in clients] == [0, 0], said
    for ids, text in zip(("0-2", "3-4"), said, strict=True):  # once per process, not once per client
        assert text.count(f"clients {ids}: the server went away; reconnecting for up to 60 s (--reconnect-timeout)") == 1, text
        assert text.count(f"clients {ids}: the server resumed the run at round 1") == 1, text
    assert "waiting for 5 clients to resume the run at round 1" in output
    metrics = json.loads((run / "metrics.json").read_text())
    uninterrupted = simulate(FedAvgGRU(FedAvgGRUConfig(sensors=5, **TINY)), SecureSumConfig(backend=Backend.MASK)).metrics
    assert metrics["resumed"] == [{"round": 1, "clients": 5}] and metrics["clients_finished"] == 5 and metrics["dropped"] == {}
    assert metrics["rounds"] == uninterrupted["rounds"] and len(metrics["rounds"]) == 3
    assert (metrics["test_rmse"], metrics["test_mae"]) == (uninterrupted["test_rmse"], uninterrupted["test_mae"])
    assert metrics["elements_by_phase"] == uninterrupted["elements_by_phase"]
    assert [row["round"] for row in metrics["round_log"]] == [0, 1, 2]
    assert json.loads((run / "checkpoint.json").read_text())["finished"] is True
    # the transcripts hold both sessions; every sum the server delivered in either is its contributors' plaintext sum
    report = audit_transcripts(run, sorted((tmp_path / "clients").glob("client-*.bin")), attacks=False)
    assert report.passed and report.run["sessions"] == 2, [(f.claim, f.evidence) for f in report.findings]
    assert report.finding("M-SUM").verdict is Verdict.PASS and report.finding("M-SUM").details["sums"] >= 2 * 3 + 2
