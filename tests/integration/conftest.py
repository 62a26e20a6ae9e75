"""Runs with real processes over real sockets on 127.0.0.1 (started by
secure_fedgraph/runs/launch.py, through tests/helpers/grpc.py's ``launch_run``)."""

from __future__ import annotations

import pytest

from tests.helpers.grpc import Run, launch_run

__all__ = ["Run", "start_server"]


@pytest.fixture
def start_server(tmp_path):
    started: list[Run] = []

    def start(**kwargs) -> Run:
        run = launch_run(tmp_path, **kwargs)
        started.append(run)
        return run

    yield start
    for run in started:
        run.local.stop(grace_s=1.0)
