"""Progress within a round (issue 33): the step reporter driven through a real in-process run of a
small plan, with its 5 s / 10 s thresholds set to 0, or with a fake clock; and the ``run``
command's --quiet and --log-format."""

from __future__ import annotations

import io
import json
from functools import partial

import pytest

from secure_fedgraph.cli import build_parser, main
from secure_fedgraph.papers.synthetic import FedAvgVector, FedAvgVectorConfig
from secure_fedgraph.protocol.core.messages import SERVER, Ack, Header
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.protocol.core.steps import Step
from secure_fedgraph.protocol.engine import progress
from secure_fedgraph.protocol.engine.progress import StepReporter
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig
from secure_fedgraph.runs.simulate import simulate
from tests.helpers import grpc as live

CLIENTS = 3


class PhasedVector(FedAvgVector):
    """fedavg-vector with its steps in a named phase, as the papers' plans name theirs."""

    def server(self, ctx):
        with ctx.phase("averaging"):
            return (yield from super().server(ctx))


def run_reported(**options) -> list[str]:
    """The lines a reporter writes over a whole small run, every step past its thresholds."""
    stream = io.StringIO()
    reporter = StepReporter(stream=stream, live=False, after_s=0.0, every_s=0.0, tick_s=None, **options)
    simulate(PhasedVector(FedAvgVectorConfig(clients=CLIENTS, length=8)), SecureSumConfig(backend=Backend.MASK), progress=reporter)
    return stream.getvalue().splitlines()


def test_lines_name_round_phase_stage_and_count_answers_up_to_those_asked():
    lines = run_reported()
    assert "round 0, averaging, input: 0 of 3 clients answered, 0 s" in lines
    inputs = [line for line in lines if line.startswith("round 0, averaging, input:")]
    assert [line.split(": ")[1].split(" clients")[0] for line in inputs] == ["0 of 3", "1 of 3", "2 of 3", "3 of 3"]
    assert "welcome: 3 of 3 clients answered, 0 s" in lines  # the session's opening: before round 0, so no round named
    assert any(line.startswith("round 0, averaging, share keys: 3 of 3") for line in lines)


def test_json_lines_parse_and_end_at_the_clients_asked():
    records = [json.loads(line) for line in run_reported(json_lines=True)]
    assert set(records[0]) == {"stage", "phase", "round", "answered", "asked", "seconds"}
    inputs = [r for r in records if r["stage"] == "input"]
    assert inputs[-1] == {"stage": "input", "phase": "averaging", "round": 0, "answered": CLIENTS, "asked": CLIENTS,
                          "seconds": inputs[-1]["seconds"]}
    assert records[0]["round"] is None and records[0]["stage"] == "welcome"


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_line_only_past_after_s_then_at_most_every_every_s_and_one_at_the_end():
    """The defaults: nothing for a step's first 5 s, then a line at most every 10 s, and its last
    count when it ends."""
    clock, stream = FakeClock(), io.StringIO()
    reporter = StepReporter(stream=stream, live=False, tick_s=None, clock=clock)
    header = Header(b"s" * 32, 2, 7, Stage.UPLOAD, SERVER)
    step = Step(Stage.UPLOAD, {c: Ack(header) for c in range(5)}, lambda client, answer: None, phase="split learning")
    reporter.started(step)
    for at in (1.0, 4.9, 5.0, 9.0, 12.0):
        clock.now = at
        reporter.answered()
    clock.now = 13.0
    reporter.finished()
    clock.now = 20.0  # a step of 2 s: nothing
    reporter.started(step)
    clock.now = 21.0
    reporter.answered()
    clock.now = 22.0
    reporter.finished()
    assert stream.getvalue().splitlines() == ["round 2, split learning, upload: 3 of 5 clients answered, 5 s",
                                              "round 2, split learning, upload: 5 of 5 clients answered, 13 s"]


def test_a_short_step_prints_nothing():
    stream = io.StringIO()
    reporter = StepReporter(stream=stream, live=False, tick_s=0.01)
    simulate(PhasedVector(FedAvgVectorConfig(clients=CLIENTS, length=8)), SecureSumConfig(backend=Backend.PLAIN), progress=reporter)
    assert stream.getvalue() == ""


def test_the_live_bar_names_the_step_and_counts_clients():
    stream = io.StringIO()
    reporter = StepReporter(stream=stream, live=True, tick_s=None, bar_delay_s=0.0)
    simulate(PhasedVector(FedAvgVectorConfig(clients=CLIENTS, length=8)), SecureSumConfig(backend=Backend.PLAIN), progress=reporter)
    assert "round 0 · averaging · input: 3/3 clients" in stream.getvalue()


def test_over_grpc_each_answer_received_counts(tmp_path):
    """The server's transport reports each answer as it is received, up to the clients asked."""
    stream = io.StringIO()
    reporter = StepReporter(stream=stream, live=False, json_lines=True, after_s=0.0, every_s=0.0, tick_s=None)
    server = live.start_server(tmp_path, clients=CLIENTS, length=8, progress=reporter)
    live.start_clients(server, list(range(CLIENTS))).wait()
    server.wait()
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    inputs = [(r["answered"], r["asked"]) for r in records if r["stage"] == "input"]
    assert inputs == [(0, CLIENTS), (1, CLIENTS), (2, CLIENTS), (3, CLIENTS)]


@pytest.mark.parametrize("command", [["run", "fedavg-vector", "--out", "RUN"], ["server", "--bind", "127.0.0.1:0", "--plan", "fedavg-vector",
                                                                             "--certs", "KEYS", "--out", "RUN"]])
def test_the_progress_options_parse(command):
    parser = build_parser()
    defaults = parser.parse_args(command)
    assert (defaults.quiet, defaults.log_format) == (False, "text")
    given = parser.parse_args([*command, "--quiet", "--log-format", "json"])
    assert (given.quiet, given.log_format) == (True, "json")
    with pytest.raises(SystemExit):
        parser.parse_args([*command, "--log-format", "xml"])


def run_command(tmp_path, capsys, monkeypatch, *options: str) -> tuple[str, str]:
    """``secure-fedgraph run fedavg-vector`` with every step past the reporter's thresholds."""
    monkeypatch.setattr(progress, "StepReporter", partial(StepReporter, after_s=0.0, every_s=0.0, tick_s=None))
    assert main(["run", "fedavg-vector", "--clients", str(CLIENTS), "--set", "length=8", "--backend", "plain", "--out", str(tmp_path / "run"),
                 *options]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_run_writes_progress_to_stderr_and_quiet_writes_none(tmp_path, capsys, monkeypatch):
    out, err = run_command(tmp_path, capsys, monkeypatch)
    assert "input: 3 of 3 clients answered" in err
    assert "clients answered" not in out and "round 0: clients 3" in out  # stdout keeps its lines
    quiet_out, quiet_err = run_command(tmp_path, capsys, monkeypatch, "--quiet")
    assert quiet_err == ""
    assert "round 0: clients 3" in quiet_out


def test_run_with_json_log_format_writes_json_lines(tmp_path, capsys, monkeypatch):
    _, err = run_command(tmp_path, capsys, monkeypatch, "--log-format", "json")
    records = [json.loads(line) for line in err.splitlines()]
    assert records and {"stage": "input", "phase": "", "round": 0, "answered": CLIENTS, "asked": CLIENTS} in [
        {k: v for k, v in r.items() if k != "seconds"} for r in records]


def test_one_ticker_shows_a_silent_steps_time_across_steps_and_ends_with_its_reporter():
    """Clients that answer only at a step's end (gRPC) must not leave the step silent: the ticker
    writes while nobody answers. One ticker serves every step, and goes with the reporter."""
    import gc
    import threading
    import time

    earlier = set(threading.enumerate())  # another test's ticker may still be ending
    stream = io.StringIO()
    reporter = StepReporter(stream=stream, live=False, after_s=0.0, every_s=0.0, tick_s=0.01)
    step = Step(Stage.UPLOAD, {0: None, 1: None}, lambda c, r: None, phase="split learning")
    for _ in range(3):
        reporter.started(step)
        before = stream.getvalue().count("\n")
        time.sleep(0.1)
        assert stream.getvalue().count("\n") > before + 1, "no line while the step was silent"
        reporter.finished()
    tickers = [t for t in threading.enumerate() if t.name == "step-progress" and t not in earlier]
    assert len(tickers) == 1
    del reporter
    gc.collect()
    tickers[0].join(1.0)
    assert not tickers[0].is_alive()


def test_a_phase_of_many_short_steps_gets_a_line_at_most_every_every_s():
    """CNFGNN's split learning is hundreds of steps of a second each: none gets a line of its
    own, so the phase says how many steps and how long, once it has run 5 s, at most every 10 s."""
    clock, stream = FakeClock(), io.StringIO()
    reporter = StepReporter(stream=stream, live=False, tick_s=None, clock=clock)
    header = Header(b"s" * 32, 0, 7, Stage.UPLOAD, SERVER)
    step = Step(Stage.UPLOAD, {c: Ack(header) for c in range(4)}, lambda client, answer: None, phase="split learning")
    for second in range(25):  # 25 steps of 0.9 s each
        clock.now = float(second)
        reporter.started(step)
        for _ in range(4):
            reporter.answered()
        clock.now = second + 0.9
        reporter.finished()
    assert stream.getvalue().splitlines() == ["round 0, split learning: 6 steps, 6 s (the last: upload, 4 of 4 clients)",  # ends at 5.9 s
                                              "round 0, split learning: 16 steps, 16 s (the last: upload, 4 of 4 clients)"]
