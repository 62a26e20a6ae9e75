"""``secure-fedgraph audit`` on runs written by ``secure-fedgraph run --transcript``: its exit
status follows the verdicts, and usage errors are one line, exit 2."""

from __future__ import annotations

import json

import pytest

from secure_fedgraph.cli import main


@pytest.mark.parametrize("backend,status", [("plain", 1), ("mask", 0)])
def test_audit_command_fails_a_plain_run_and_passes_a_masked_one(backend, status, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["run", "fedavg-vector", "--clients", "3", "--set", "length=40", "--backend", backend, "--transcript", "--out", str(run)]) == 0
    assert (run / "transcript.bin").is_file() and len(list((run / "clients").glob("client-*.bin"))) == 3
    capsys.readouterr()
    assert main(["audit", str(run), str(run / "clients"), "--no-attacks"]) == status
    out = capsys.readouterr().out
    assert ("[FAIL] M-NOPLAIN" in out) == (backend == "plain") and ("[FAIL]" in out) == (backend == "plain")
    assert ("[PASS] M-UNIFORM" in out) == (backend == "mask")
    assert f"report in {run / 'audit' / 'audit.md'}" in out
    report = json.loads((run / "audit" / "audit.json").read_text())
    assert report["passed"] is (status == 0) and report["run"]["mode"] == "with client transcripts"


def test_audit_of_a_folder_without_a_transcript_is_a_usage_error(tmp_path, capsys):
    assert main(["audit", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"missing {tmp_path / 'transcript.bin'}" in err and "--transcript" in err


def test_audit_of_a_missing_client_transcript_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "transcript.bin").write_bytes(b"")
    assert main(["audit", str(tmp_path), str(tmp_path / "nope.bin")]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_a_run_folder_used_again_holds_only_the_new_runs_transcripts(tmp_path, capsys):
    """`run --transcript` into a folder that held a plain run: the new (mask) run's audit sees one
    session and passes, where appending would have mixed the plain run's inputs into it."""
    run = tmp_path / "run"
    for backend in ("plain", "mask"):
        assert main(["run", "fedavg-vector", "--clients", "3", "--set", "length=40", "--backend", backend, "--transcript", "--out", str(run)]) == 0
    assert main(["audit", str(run), str(run / "clients"), "--no-attacks"]) == 0
    assert json.loads((run / "audit" / "audit.json").read_text())["run"]["sessions"] == 1
