"""DP-SGD for the plans' local training, written once: each client's mechanism, the steps a run
plans (what ``--target-epsilon`` calibrates on), and the report. Its options (``dpsgd_sigma``,
0: off; ``dpsgd_clip``; ``dp_delta``) and their checks are papers/dp_options.py's
:class:`~secure_fedgraph.papers.dp_options.DPSGDOptions`, which every plan with DP-SGD inherits.

The mechanism is opacus' (privacy/mechanisms/dpsgd.py); its optimiser records every step in
the client's own accountant; at the end of the run the server collects each client's steps
through ``ctx.collect_privacy()`` (a collective) and reports both accountants. A plan calls
:func:`client_mechanism` where it trains and :func:`server_report` / ``ctx.report_privacy()``
at the end, and counts nothing itself.
"""

from __future__ import annotations

import math
from typing import Any

from secure_fedgraph import privacy
from secure_fedgraph.errors import ConfigError
from secure_fedgraph.protocol.engine.contexts import ClientContext, ServerContext
from secure_fedgraph.protocol.core.steps import StepGen


def sample_rate(batch_size: int, samples: int) -> float:
    """Poisson sampling's q: an expected batch of ``batch_size`` of ``samples``."""
    return min(1.0, batch_size / samples)


def steps_per_round(rate: float, epochs: int, max_steps: int | None) -> int:
    """Noisy steps a client takes in one round: ``epochs`` expected passes of 1 / q steps, capped."""
    steps = epochs * max(1, round(1 / rate))
    return steps if max_steps is None else min(steps, max_steps)


def client_mechanism(ctx: ClientContext, config: Any, *, samples: int, batch_size: int, per_epoch: bool = False,
                     sensitivity: float = 1.0) -> privacy.mechanisms.dpsgd.DPSGD | None:
    """This client's DP-SGD (None when ``dpsgd_sigma`` is 0): noise and Poisson samples from the
    client's noise source, every step recorded in its own accountant. ``per_epoch``: fixed
    disjoint batches instead, one release per epoch (``batch_size`` is then the samples)."""
    if not config.dpsgd_sigma:
        return None
    from secure_fedgraph.privacy.mechanisms.dpsgd import DPSGD

    return DPSGD(float(config.dpsgd_sigma), float(config.dpsgd_clip), sample_rate(batch_size, samples), noise=ctx.noise("dpsgd"),
                 record=lambda steps: ctx.accountant.record_steps(ctx.client_id, steps), per_epoch=per_epoch, sensitivity=sensitivity)


def calibrated_sigma(config: Any, target_epsilon: float, *, rate: float, steps: int) -> float:
    """The DP-SGD noise multiplier that spends at most ``target_epsilon`` over ``steps`` steps at ``rate``."""
    if config.dpsgd_sigma:
        raise ConfigError(f"a target epsilon calibrates dpsgd_sigma: leave it out (got dpsgd_sigma={config.dpsgd_sigma:g})")
    return privacy.calibrate_sigma(target_epsilon=target_epsilon, delta=config.dp_delta, sample_rate=rate, steps=steps)


def server_report(ctx: ServerContext, config: Any, *, unit: privacy.Unit, mechanisms: list[str],
                  sampling: str = "Poisson sampling") -> StepGen[dict]:
    """Collect every client's DP-SGD steps (with DP-SGD on) and report the run's budget for
    ``unit``: the ``privacy`` entry of its metrics."""
    if config.dpsgd_sigma:
        yield from ctx.collect_privacy()
        mechanisms = [*mechanisms, f"DP-SGD in local training: per-sample clip {config.dpsgd_clip:g}, sigma {config.dpsgd_sigma:.4g}, "
                                   f"{sampling}, applied by each client (opacus)"]
    return ctx.accountant.report(ctx.clients, unit=unit, delta=config.dp_delta, mechanism="; ".join(mechanisms))


def is_on(config: Any) -> bool:
    return bool(getattr(config, "dpsgd_sigma", 0)) and math.isfinite(config.dpsgd_sigma)
