"""Per-round progress lines, live progress within a round, and the traffic summary a run writes
to metrics.json, the same for the in-process ``run`` command and the gRPC server."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, TextIO

from tqdm import tqdm

from secure_fedgraph.protocol.core.steps import Step
from secure_fedgraph.protocol.engine.contexts import RoundReport, ServerContext
from secure_fedgraph.protocol.transports.common import Traffic


def human_bytes(nbytes: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if nbytes < 1000 or unit == "GB":
            return f"{nbytes:.1f} {unit}"
        nbytes /= 1000
    raise AssertionError


class RoundLog:
    """Turns the plan's round reports into rows (metrics, bytes up/down in total and by phase,
    seconds) and prints one line per round. Rounds count from 0 in these lines as in
    metrics.json, the wire headers and every drop or re-key message."""

    def __init__(self, traffic: Traffic, say: Callable[[str], None] = print) -> None:
        self.traffic = traffic
        self.say = say
        self.rows: list[dict[str, Any]] = []
        self._last = (time.monotonic(), {}, {}, {})

    def __call__(self, report: RoundReport) -> None:
        now = time.monotonic()
        up, down = dict(self.traffic.up_by_phase), dict(self.traffic.down_by_phase)
        then, up0, down0, seconds0 = self._last
        up_phase = {p: b - up0.get(p, 0) for p, b in up.items() if b - up0.get(p, 0)}
        down_phase = {p: b - down0.get(p, 0) for p, b in down.items() if b - down0.get(p, 0)}
        seconds = {p: s - seconds0.get(p, 0.0) for p, s in report.phase_seconds.items() if s - seconds0.get(p, 0.0) > 0}
        row = {"round": report.round, **report.metrics, "bytes_up": sum(up_phase.values()), "bytes_down": sum(down_phase.values()),
               "bytes_up_by_phase": up_phase, "bytes_down_by_phase": down_phase, "seconds": now - then, "seconds_by_phase": seconds}
        self.rows.append(row)
        self._last = (now, up, down, dict(report.phase_seconds))
        shown = ", ".join(f"{k.replace('_', ' ')} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in report.metrics.items())
        phases = "; ".join(f"{p or 'other'} {human_bytes(up_phase.get(p, 0))} up {human_bytes(down_phase.get(p, 0))} down"
                           + (f" {seconds[p]:.1f} s" if p in seconds else "") for p in sorted(set(up_phase) | set(down_phase)))
        self.say(f"round {report.round}: {shown}; up {human_bytes(row['bytes_up'])}, down {human_bytes(row['bytes_down'])}, "
                 f"{row['seconds']:.1f} s" + (f" [{phases}]" if (set(up_phase) | set(down_phase)) - {""} else ""))


def traffic_summary(traffic: Traffic, ctx: ServerContext) -> dict[str, Any]:
    """Totals for metrics.json: wire bytes by stage (collective) and by phase, and the tensor
    elements each phase moved (the unit of the papers' cost formulas)."""
    return {
        "bytes_up_total": sum(traffic.up.values()),
        "bytes_down_total": sum(traffic.down.values()),
        **({"wire_bytes_up_total": traffic.wire_up, "wire_bytes_down_total": traffic.wire_down} if traffic.wire_down else {}),
        "bytes_up_by_stage": {s.value: b for s, b in traffic.up_by_stage.items()},
        "bytes_down_by_stage": {s.value: b for s, b in traffic.down_by_stage.items()},
        "bytes_up_by_phase": {p or "other": b for p, b in traffic.up_by_phase.items()},
        "bytes_down_by_phase": {p or "other": b for p, b in traffic.down_by_phase.items()},
        "elements_by_phase": {p or "other": dict(e) for p, e in ctx.elements.items()},
        "seconds_by_phase": {p: round(s, 4) for p, s in ctx.seconds.items()},
        "server_seconds": traffic.server_seconds,
        "wall_seconds_by_stage": {s.value: round(t, 4) for s, t in traffic.wall_by_stage.items()},
        "slowest_step_seconds_by_stage": {s.value: round(t, 4) for s, t in traffic.slowest_by_stage.items()},  # vs --step-timeout
    }


class StepReporter:
    """Live progress within a round: for each step a transport executes, its round,
    phase and stage, how many clients were asked, how many have answered and the seconds since it
    began, so a step of minutes is not silent. It is a :class:`~secure_fedgraph.protocol.core.steps.StepProgress`.

    With ``live`` (default: ``stream`` is a terminal) a tqdm bar, redrawn in place and cleared
    when the step ends, so the per-round lines on stdout never share a line with it. Otherwise
    plain lines (``json_lines``: one JSON object each, with stage, phase, round, answered, asked,
    seconds): one at most every ``every_s`` seconds for a step past ``after_s`` seconds, and one
    at its end, so short steps (and the test suite) print nothing. One ticker thread, started
    with the first step and ending with the reporter, looks every ``tick_s`` seconds (None: only
    when an answer arrives), so a step whose clients answer together at its end (gRPC) still shows
    its time; a run has thousands of steps, so none of them starts a thread of its own. Only counts, names and seconds are shown,
    never a message's content (STYLE.md 2.5)."""

    def __init__(self, *, stream: TextIO | None = None, live: bool | None = None, json_lines: bool = False, after_s: float = 5.0,
                 every_s: float = 10.0, tick_s: float | None = 1.0, bar_delay_s: float = 0.5,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.live = (not json_lines and _is_terminal(self.stream)) if live is None else live
        self.json_lines = json_lines
        self.after_s, self.every_s, self.tick_s, self.bar_delay_s = after_s, every_s, tick_s, bar_delay_s
        self.clock = clock
        self._lock = threading.Lock()
        self._step: Step | None = None
        self._round: int | None = None
        self._asked = self._answered = 0
        self._began = 0.0
        self._shown: tuple[float, int] | None = None  # (when, answered) of the step's last line
        self._bar: tqdm | None = None
        self._ticker: threading.Thread | None = None
        self._phase: tuple[int | None, str] | None = None  # (round, phase) of the steps in a row
        self._phase_began, self._phase_steps = 0.0, 0
        self._said_at: float | None = None  # when the last line went out

    def started(self, step: Step) -> None:
        """A transport begins ``step``: its requests go to ``len(step.requests)`` clients."""
        with self._lock:
            self._step, self._round = step, _round_of(step)
            self._asked, self._answered = len(step.requests), 0
            self._began, self._shown = self.clock(), None
            if (self._round, step.phase) != self._phase:
                self._phase, self._phase_began, self._phase_steps = (self._round, step.phase), self._began, 0
            if self.live:
                sized = _columns(self.stream) is not None  # a terminal of width 0 (a bare pseudo-terminal) would show tqdm nothing
                self._bar = tqdm(total=self._asked, desc=" · ".join(self._names()), file=self.stream, leave=False, delay=self.bar_delay_s,
                                 bar_format="{desc}: {n_fmt}/{total_fmt} clients, {elapsed_s:.0f} s |{bar}|", dynamic_ncols=sized,
                                 ncols=None if sized else 100, nrows=None if sized else 20)
            self._tick()
            if self.tick_s is not None and self._ticker is None:
                self._ticker = threading.Thread(target=_tick_while_alive, args=(weakref.ref(self), self.tick_s), daemon=True,
                                                name="step-progress")
                self._ticker.start()

    def answered(self) -> None:
        """One more client answered the step."""
        with self._lock:
            self._answered += 1
            if self._bar is not None:
                self._bar.update(1)
            self._tick()

    def finished(self) -> None:
        """The step is over: its bar goes, and a step that ran past ``after_s`` gets its last count.
        A phase of many short steps (CNFGNN's split learning: hundreds of steps of a second) gets a
        line at most every ``every_s`` once it has run ``after_s``: how many steps, how long."""
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None
            elif self._step is not None:
                now = self.clock()
                if now - self._began >= self.after_s and (self._shown is None or self._shown[1] != self._answered):
                    self._line()
                self._phase_steps += 1
                if (self._shown is None and now - self._phase_began >= self.after_s
                        and (self._said_at is None or now - self._said_at >= self.every_s)):
                    self._phase_line(now)
            self._step = None

    def _tick(self) -> None:
        """Under the lock: redraw the bar's seconds, or write a line if one is due."""
        if self._step is None:
            return
        now = self.clock()
        if self._bar is not None:
            if now - self._began >= self.bar_delay_s:
                self._bar.refresh()
        elif now - self._began >= self.after_s and (self._shown is None or now - self._shown[0] >= self.every_s):
            self._line()

    def _phase_line(self, now: float) -> None:
        """Under the lock, at the end of a short step: the phase so far."""
        self._said_at, seconds, step = now, now - self._phase_began, self._step
        if self.json_lines:
            line = json.dumps({"stage": step.stage.value, "phase": step.phase, "round": self._round, "answered": self._answered,
                               "asked": self._asked, "seconds": round(seconds, 1), "steps": self._phase_steps})
        else:
            where = ", ".join(self._names()[:-1]) or "the session"
            line = (f"{where}: {self._phase_steps} steps, {seconds:.0f} s (the last: {self._names()[-1]}, {self._answered} of "
                    f"{self._asked} clients)")
        print(line, file=self.stream, flush=True)

    def _line(self) -> None:
        now = self.clock()
        seconds = now - self._began
        self._shown, self._said_at = (now, self._answered), now
        step = self._step
        if self.json_lines:
            line = json.dumps({"stage": step.stage.value, "phase": step.phase, "round": self._round, "answered": self._answered,
                               "asked": self._asked, "seconds": round(seconds, 1)})
        else:
            line = f"{', '.join(self._names())}: {self._answered} of {self._asked} clients answered, {seconds:.0f} s"
        print(line, file=self.stream, flush=True)

    def _names(self) -> list[str]:
        """Round, phase (where the plan names one) and stage, for a line or a bar."""
        return [*([f"round {self._round}"] if self._round is not None else []), *([self._step.phase] if self._step.phase else []),
                self._step.stage.value.replace("_", " ")]


def _tick_while_alive(reporter: weakref.ref[StepReporter], tick_s: float) -> None:
    """The ticker: holds the reporter only while it ticks, so it ends once the reporter is gone."""
    while True:
        time.sleep(tick_s)
        alive = reporter()
        if alive is None:
            return
        with alive._lock:
            alive._tick()
        del alive


def _round_of(step: Step) -> int | None:
    """The round a step's requests name in their headers: None for a request without one, or
    before the first round (the session's opening steps say round -1)."""
    header = getattr(next(iter(step.requests.values()), None), "header", None)
    number = getattr(header, "round", None)
    return number if isinstance(number, int) and number >= 0 else None


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _columns(stream: TextIO) -> int | None:
    """The terminal's width, or None where it reports none (not a terminal, or a size of 0)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns or None
    except (AttributeError, OSError, ValueError):
        return None


def step_reporter(*, quiet: bool, json_lines: bool) -> StepReporter | None:
    """The progress the ``run`` and ``server`` commands show on stderr: none with ``--quiet``,
    JSON lines with ``--log-format json``, else a bar on a terminal and plain lines elsewhere."""
    return None if quiet else StepReporter(json_lines=json_lines)
