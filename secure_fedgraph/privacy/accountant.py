"""The accountant: a history of what each client released, per stream of rows and per DP-SGD
schedule, and its report with both accountants (opacus RDP and PRV).

It is fed by the collectives, never counted by a plan: the server's ``upload`` records the rows
a DP upload released (a plan only names them, as a :class:`RowRelease`), and the DP-SGD
optimiser records its own steps in the client's accountant (:mod:`.mechanisms.dpsgd`), which the
client reports with ``ctx.report_privacy()``. As in opacus, the state here is a history; the
mathematics is in :mod:`.analysis` (pure functions).

Rows released in one upload are disjoint samples (parallel composition), releases of one row
compose sequentially; how they add up for one member of the privacy unit (a window, a reading
in up to 12 windows, a whole sensor) is :func:`.analysis.units.member_releases`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.privacy.analysis.rdp import History, rdp_epsilon
from secure_fedgraph.privacy.analysis.units import Unit, UnitKind, member_releases

WINDOW = Unit(UnitKind.ROW, "one window (12 input steps) of one sensor client")  # CNFGNN's default unit
USER_FEATURES = Unit(UnitKind.ROW, "one user's feature vector")  # nFedGNN's: one row per client, the user's own


@dataclass(frozen=True)
class RowRelease:
    """What a DP upload releases of each client's data: rows ``rows`` of stream ``stream``
    (e.g. the training windows), each clipped and noised with multiplier ``sigma``."""

    stream: str
    rows: Sequence[int] | np.ndarray = field(repr=False)
    sigma: float


@dataclass(frozen=True)
class Steps:
    """DP-SGD steps: ``steps`` noisy steps at noise multiplier ``sigma``, each sampling every
    training sample with probability ``sample_rate`` (Poisson sampling; 1: every sample once).

    ``sensitivity``: how far one member of the unit moves the released noisy gradients, in
    units of the clip (1: opacus' add/remove of one sample; FedSTGD's shared batches are more:
    papers/fedstgd.py). The accountant prices the steps at ``sigma / sensitivity``."""

    sigma: float
    sample_rate: float
    steps: int
    sensitivity: float = 1.0

    @property
    def accounted_sigma(self) -> float:
        return self.sigma / self.sensitivity


class PrivacyAccountant:
    """Release counts per client, per stream (in the order streams first appear), per row and
    noise multiplier; and DP-SGD steps per client."""

    def __init__(self) -> None:
        self._rows: dict[tuple[int, float], dict[str, np.ndarray]] = {}
        self._steps: dict[int, list[Steps]] = {}

    # -- fed by the collectives and mechanisms ----------------------------------------------

    def record(self, client: int, release: RowRelease) -> None:
        """One release of ``release.rows`` of ``release.stream`` by ``client``."""
        rows = np.asarray(release.rows, dtype=np.int64)
        if rows.size == 0:
            return
        streams = self._rows.setdefault((client, float(release.sigma)), {})
        counts = streams.get(release.stream, np.zeros(0, dtype=np.int64))
        if int(rows.max()) >= counts.size:
            counts = np.concatenate([counts, np.zeros(int(rows.max()) + 1 - counts.size, dtype=np.int64)])
        np.add.at(counts, rows, 1)
        streams[release.stream] = counts

    def record_steps(self, client: int, steps: Steps) -> None:
        """DP-SGD steps of ``client`` (merged with its last entry when sigma and rate agree)."""
        if steps.steps <= 0:
            return
        entries = self._steps.setdefault(client, [])
        if entries and (entries[-1].sigma, entries[-1].sample_rate, entries[-1].sensitivity) == (steps.sigma, steps.sample_rate, steps.sensitivity):
            entries[-1] = Steps(steps.sigma, steps.sample_rate, entries[-1].steps + steps.steps, steps.sensitivity)
        else:
            entries.append(steps)

    # -- read -------------------------------------------------------------------------------

    def steps_of(self, client: int) -> list[Steps]:
        return list(self._steps.get(client, []))

    def most_released(self, client: int) -> int:
        """How often this client's most released row went out (0: never)."""
        return max((member_releases(WINDOW, list(s.values())) for (c, _), s in self._rows.items() if c == client), default=0)

    def uploads_history(self, client: int, unit: Unit) -> History:
        """(sigma, 1, K) per noise multiplier: K releases for the member of ``unit`` that takes
        part in most (an upper bound when several multipliers were used: each has its own worst member)."""
        return [(sigma, 1.0, member_releases(unit, list(s.values()))) for (c, sigma), s in self._rows.items() if c == client]

    def history(self, client: int, unit: Unit) -> History:
        """Every release of ``client`` for one member of ``unit``: its uploads and DP-SGD steps.

        Raises:
            ConfigError: DP-SGD steps under a unit other than one row (subsampled steps are
                accounted per sample; group privacy over several is not computed here).
        """
        steps = self._steps.get(client, [])
        if steps and unit.kind is not UnitKind.ROW:
            raise ConfigError(f"DP-SGD is accounted per training sample; the unit {unit.description!r} spans several (use the "
                              "window unit with DP-SGD)")
        return [*self.uploads_history(client, unit), *((s.accounted_sigma, s.sample_rate, s.steps) for s in steps)]

    def report(self, clients: Iterable[int], *, unit: Unit, delta: float, mechanism: str) -> dict:
        """The ``privacy`` entry of a run's metrics: each client's epsilon at ``delta`` for one
        member of ``unit``, from opacus' RDP accountant and from its PRV accountant.

        Keys: ``mechanism``, ``unit``, ``delta``, ``epsilon_max`` and ``epsilon_per_client``
        (RDP, the guarantee the run states), ``releases_per_client`` (K, the member's
        releases of uploaded rows), ``dpsgd_steps_per_client``, and ``accountants``: per
        accountant its ``epsilon_max`` and ``epsilon_per_client``, and for PRV a ``note``
        where it could not answer (too large an epsilon or too many releases: RDP stands).
        """
        from secure_fedgraph.privacy.analysis.prv import prv_epsilon

        clients = sorted(clients)
        histories = {c: tuple(self.history(c, unit)) for c in clients}
        rdp: dict[History, float] = {}
        prv: dict[History, float | None] = {}
        notes: set[str] = set()
        for history in set(histories.values()):  # clients with one history share one computation
            rdp[history] = rdp_epsilon(history, delta)
            result = prv_epsilon(history, delta)
            prv[history] = result.epsilon
            if result.reason:
                notes.add(result.reason)
        per_rdp = {str(c): rdp[h] for c, h in histories.items() if h}
        per_prv = {str(c): prv[h] for c, h in histories.items() if h}
        prv_values = [v for v in per_prv.values() if v is not None]
        return {
            "mechanism": mechanism,
            "unit": unit.description,
            "delta": delta,
            "epsilon_max": max(per_rdp.values(), default=0.0),
            "epsilon_per_client": per_rdp,
            "releases_per_client": {str(c): sum(n for _, q, n in self.uploads_history(c, unit)) for c in clients},
            "dpsgd_steps_per_client": {str(c): sum(s.steps for s in self._steps.get(c, [])) for c in clients if c in self._steps},
            "accountants": {
                "rdp": {"epsilon_max": max(per_rdp.values(), default=0.0), "epsilon_per_client": per_rdp},
                "prv": {"epsilon_max": max(prv_values) if prv_values and len(prv_values) == len(per_prv) else None,
                        "epsilon_per_client": per_prv, "note": "; ".join(sorted(notes)) or None},
            },
        }

