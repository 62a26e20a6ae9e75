"""The demo, small: real processes, the FedAvg plan over gRPC, and its audit."""

from __future__ import annotations

from pathlib import Path

from secure_fedgraph.runs.demo import DemoOptions, run_demo


def test_demo_runs_across_processes_and_its_audit_passes(tmp_path):
    lines: list[str] = []
    assert run_demo(DemoOptions(clients=8, processes=2, rounds=2, local_steps=1, keep=tmp_path), say=lines.append)
    text = "\n".join(lines)
    assert "round 2: clients 8" in text
    assert "[PASS] M-UNIFORM" in text and "[PASS] M-SUM" in text and "[FAIL]" not in text
    assert (Path(tmp_path) / "run" / "transcript.bin").stat().st_size > 0
