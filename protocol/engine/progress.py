"""Per-round progress lines and the traffic summary a run writes to metrics.json, the same for
the in-process ``run`` command and the gRPC server."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

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
