"""The demo, small: real processes, the FedAvg plan over gRPC, and its audit."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from secure_fedgraph.runs.demo import DemoOptions, run_demo


def test_demo_runs_across_processes_and_its_audit_passes():
    lines: list[str] = []
    ok = run_demo(DemoOptions(clients=8, processes=2, rounds=2, local_steps=1), say=lines.append)
    text = "\n".join(lines)
    told = re.search(r"run folder (\S+) ", text)
    assert told is not None, text
    folder = Path(told.group(1))
    try:
        assert ok, text
        assert "round 1: clients 8" in text and "round 2:" not in text  # rounds count from 0, as in metrics.json
        assert "[PASS] M-UNIFORM" in text and "[PASS] M-SUM" in text and "[FAIL]" not in text
        # the folder the user is told about survives, with what the server said it wrote; the throwaway keys do not
        assert (folder / "run" / "transcript.bin").stat().st_size > 0 and (folder / "run" / "metrics.json").exists()
        assert f"metrics in {folder / 'run' / 'metrics.json'}" in text
        assert sorted(p.name for p in (folder / "logs").iterdir()) == ["client-process-0.log", "client-process-1.log"]
        assert not (folder / "keys").exists()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
