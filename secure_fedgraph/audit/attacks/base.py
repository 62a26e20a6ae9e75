"""What every attack shares: the plan rebuilt from the run's configuration, the public slice,
the ground truth loaded once per client, and the run's epsilon."""

from __future__ import annotations

import math
import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from secure_fedgraph.audit.findings import AttackResult
from secure_fedgraph.audit.replay import RunView, run_plan

PUBLIC_EVERY = 4  # every fourth client's raw data is public to the attacker


def public_clients(clients: list[int]) -> tuple[list[int], list[int]]:
    """(public, private): every fourth client id is in the attacker's public slice."""
    public = [c for c in clients if c % PUBLIC_EVERY == 0]
    return public, [c for c in clients if c % PUBLIC_EVERY != 0]


@dataclass
class AttackContext:
    """One audit's inputs to its attacks: the replayed run and where its data lives."""

    view: RunView
    data_dir: str | os.PathLike | None = None
    seed: int = 0
    _data: dict[int, Any] = field(default_factory=dict, repr=False)
    _shared: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def plan(self):
        """The run's plan, rebuilt from the configuration its Welcome announced."""
        return run_plan(self.view)

    def client_data(self, client: int) -> Any:
        """A client's raw data (the public slice for fitting; ground truth for scoring)."""
        if client not in self._data:
            self._data[client] = self.plan.load_client_data(client, self.data_dir)
        return self._data[client]

    def shared(self, key: str, make: Callable[[], Any]) -> Any:
        """What several attacks of one audit share (one decoder fit, two measures), made once."""
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]

    def epsilon(self) -> float:
        """The run's largest per-client epsilon from the releases its transcript shows (nan without noise)."""
        from secure_fedgraph.audit.privacy_claims import transcript_epsilons

        found = transcript_epsilons(self.view)
        return max(found[0].values()) if found else math.nan


class Attack(ABC):
    """An attack on one plan's uploads; ``run`` returns None when the run lacks what it needs."""

    name: ClassVar[str]
    claim: ClassVar[str]  # the threat_model.md claim it is reported beside
    plans: ClassVar[frozenset[str]]

    def applies(self, view: RunView) -> bool:
        return view.plan in self.plans

    @abstractmethod
    def run(self, context: AttackContext) -> AttackResult | None:
        """Measure; the result's ``errors`` hold the attack and its references."""
