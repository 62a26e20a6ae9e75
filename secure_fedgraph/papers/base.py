"""What every paper's plan provides: a configuration, a server function and a client function."""

from __future__ import annotations

import dataclasses
import json
import os
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.protocol.engine.contexts import ClientContext, ClientPlan, ServerContext
from secure_fedgraph.protocol.core.steps import StepGen


class Plan(ABC):
    """A paper's round structure. ``server`` yields steps (collectives via ``ctx``) and returns
    the run's metrics; ``client`` yields what one logical client waits for. Neither imports a
    transport, crypto or gRPC.

    A plan that can resume after the server dies (its ``papers.PlanEntry`` has no ``why_not_resumable``) starts both
    sides from ``ctx.resume_from(fresh_state)`` and calls ``ctx.checkpoint(r, state)`` at the top
    of every round r, the server before the round's key set-up: ``state`` is all that side needs
    to go on from round r, and must not depend on anything random that is not derived from the
    run seed and the round (``server --resume``; ``simulate(..., restart_at=...)`` checks it)."""

    name: ClassVar[str]
    Config: ClassVar[type]
    clients_field: ClassVar[str]  # the Config field the CLI's --clients sets
    uploads_activations: ClassVar[bool] = False  # split learning: the server sees each client's activations
    one_party: ClassVar[bool] = False  # one client holding all the data is the plan's centralised baseline (runs/simulate.py: simulate_one_party)

    @property
    def dp_sigma(self) -> float | None:
        """The noise multiplier on uploaded activations (None: the plan has no DP option);
        clients compare it with their own --min-dp-sigma."""
        return getattr(self.config, "dp_sigma", None)

    @property
    def ddp_noise(self) -> float | None:
        """The distributed DP noise multiplier on the plan's model sums (None: the plan has no
        such option; 0: off); clients compare it with their own --min-ddp-noise."""
        return getattr(self.config, "ddp_noise", None)

    @property
    def ddp_clip(self) -> float | None:
        """The L2 clip of each client's contribution to the plan's model sums with distributed DP
        (None: no such option); with the grid it sets what --min-ddp-noise counts per unit of."""
        return getattr(self.config, "ddp_clip", None)

    ddp_composes_dpsgd: ClassVar[bool] = False  # its distributed DP report composes its DP-SGD steps too (FedSTGD's one epsilon)

    def noised_sums(self) -> dict[str, float]:
        """The sums this plan's distributed DP noises, each with the L2 bound its SumNoise
        announces (the audit's DDP-NOISE checks every one carries it): by default its model sums
        at ``ddp_clip``; none when ``ddp_noise`` is 0."""
        return {"weights": self.ddp_clip, "update": self.ddp_clip} if self.ddp_noise else {}

    def noise_account(self, sums: list, steps: dict, *, clients: list[int], **terms: Any) -> dict | None:
        """The ``privacy`` report of a run recomputed from its delivered noised sums (NoisedSum)
        and its clients' DP-SGD steps, the audit's DDP-ACCOUNT; ``terms``: NoiseLedger.report's
        but delta. None (the default): the noise ledger's own report, each client's whole
        contribution the unit, at ``ddp_delta``."""
        return None

    @property
    def seeded_randomness(self) -> bool:
        """Whether the plan's clients draw private state (initial weights, dropout masks) from the
        run seed, which the server knows; clients refuse it unless --allow-seeded-randomness."""
        return False

    @property
    def dpsgd_sigma(self) -> float | None:
        """The DP-SGD noise multiplier of the plan's local training (None: the plan has no DP-SGD;
        0: off); clients compare it with their own --min-dpsgd-sigma."""
        return getattr(self.config, "dpsgd_sigma", None)

    def __init__(self, config: Any | None = None) -> None:
        self.config = config if config is not None else self.Config()
        if not isinstance(self.config, self.Config):
            raise ConfigError(f"plan {self.name} needs a {self.Config.__name__}, got {type(self.config).__name__}")

    @property
    def seed(self) -> int:
        return self.config.seed

    @abstractmethod
    def client_ids(self) -> list[int]:
        """The logical clients this plan runs with."""

    @abstractmethod
    def server(self, ctx: ServerContext) -> StepGen[dict]:
        """The server's side; returns the run's metrics."""

    @abstractmethod
    def client(self, ctx: ClientContext) -> ClientPlan:
        """One logical client's side."""

    def load_client_data(self, client_id: int, data_dir: str | os.PathLike | None) -> Any:
        """What the client reads locally before the run (its own data only)."""
        return None

    def load_server_data(self, data_dir: str | os.PathLike | None) -> Any:
        """What the server holds before the run (e.g. CNFGNN's sensor graph; never client data)."""
        return None

    def calibrated(self, target_epsilon: float, *, data_dir: str | os.PathLike | None = None, option: str | None = None) -> Plan:
        """This plan with its DP noise multiplier ``option`` (None: the plan's first) calibrated
        so that the epsilon it reports is at most ``target_epsilon`` (``--target-epsilon``).

        Raises:
            ConfigError: the plan has no DP noise to calibrate.
            PrivacyBudgetError: the target cannot be reached.
        """
        raise ConfigError(f"plan {self.name} has no DP noise to calibrate (--target-epsilon)")

    def config_json(self) -> str:
        return json.dumps({"plan": self.name, "config": dataclasses.asdict(self.config)}, sort_keys=True)

    @classmethod
    def from_config_json(cls, text: str) -> Plan:
        data = json.loads(text)
        if data.get("plan") != cls.name:
            raise ConfigError(f"configuration is for plan {data.get('plan')!r}, not {cls.name!r}")
        fields = {f.name for f in dataclasses.fields(cls.Config)}
        unknown = set(data["config"]) - fields
        if unknown:
            raise ConfigError(f"plan {cls.name}: unknown configuration fields {sorted(unknown)}")
        return cls(cls.Config(**data["config"]))

