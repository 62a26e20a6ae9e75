"""The papers, each a round plan over the collectives (one module per paper), and the registry
the runtimes use to find a plan by name.

The registry is one :class:`PlanEntry` per plan in ``ENTRIES``: its name, module, class and
dataset, whether it can resume (or why not), the option a sweep varies and whether it
calibrates it, whether the audit attacks it, and its centralised baseline. Adding a plan means
writing its module and adding one entry here; every caller (the command line, the runtimes,
``sweep``) asks the entry. The entries name modules and classes as strings, so the command
line can check a plan name and its data files before it imports torch; the classes load on
first use (``plan_class``, or an attribute of this package).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from secure_fedgraph.errors import ConfigError

if TYPE_CHECKING:
    from secure_fedgraph.papers.base import Plan


@dataclass(frozen=True)
class Windows:
    """A forecasting plan's input and output windows, as the command line checks them against
    the data before torch is imported (cli/plans.py: check_windows; data/windows.py): the
    defaults of its ``steps_in`` and ``steps_out`` options (tests/papers/test_registry.py holds
    them to the configs'), whether each window stays within a day (FedSTGD) or slides across a
    gapless stretch (DCRNN's), and the option spacing the sliding windows out, if any."""

    steps_in: int
    steps_out: int
    within_day: bool = False
    stride_option: str | None = None


PYG_CENTRALISED = "pyg-centralised"  # nFedGNN's reference: the PyG model on the whole graph, every feature in one place


@dataclass(frozen=True)
class PlanEntry:
    """One plan's registration (reading it imports nothing).

    Attributes:
        name: the plan's name (``--plan``), its class's ``name``.
        module, cls: where the plan's class lives, loaded on first use.
        dataset: the dataset its clients read: None, "metr-la", "hzmetro" or "planetoid".
        why_not_resumable: None when the plan's server and clients save their state at every
            round boundary (``ctx.checkpoint``), so ``server --resume`` can go on with it;
            otherwise why a resumed run is refused.
        privacy_option: the config option holding the noise multiplier ``secure-fedgraph
            sweep`` varies (None: the plan has none to sweep).
        also_swept: further options a sweep sets to the same multiplier (fedstgd: ``dpsgd_sigma``
            beside ``ddp_noise``, one multiplier for its sums and its DP-SGD steps, as its one
            epsilon covers both); the non-private reference sets them to 0 too.
        calibrates: whether the plan calibrates ``privacy_option`` to a target epsilon before a
            run (``sweep --epsilons``, ``run --target-epsilon``).
        attacked: whether the audit attacks its uploads (secure_fedgraph/audit/attacks/: what
            ``sweep --attacks`` draws per epsilon).
        centralised_method: the centralised baseline a sweep draws beside it (runs/comparison.py's
            method names, or ``PYG_CENTRALISED``: runs/node_centralised.py's whole-graph PyG GCN or
            GAT; None: none).
        windows: the input and output windows of a forecasting plan (None: it cuts none).
    """

    name: str
    module: str
    cls: str
    dataset: str | None = None
    why_not_resumable: str | None = None
    privacy_option: str | None = None
    also_swept: tuple[str, ...] = ()
    calibrates: bool = False
    attacked: bool = False
    centralised_method: str | None = None
    windows: Windows | None = None

    def __post_init__(self) -> None:
        if self.calibrates and self.privacy_option is None:
            raise ConfigError(f"plan {self.name}: calibrates=True needs a privacy_option")
        if self.also_swept and self.privacy_option is None:
            raise ConfigError(f"plan {self.name}: also_swept needs a privacy_option")

    @property
    def swept(self) -> tuple[str, ...]:
        """Every option a sweep sets to its noise multiplier: ``privacy_option`` first."""
        return () if self.privacy_option is None else (self.privacy_option, *self.also_swept)

    @property
    def resumable(self) -> bool:
        return self.why_not_resumable is None


ENTRIES: tuple[PlanEntry, ...] = (
    PlanEntry("fedavg-gru", "secure_fedgraph.papers.fedavg", "FedAvgGRU", "metr-la",
              # distributed DP inside the FedAvg sum: its epsilon depends on how many clients survive each sum, so no calibration
              privacy_option="ddp_noise", centralised_method="gru-centralised", windows=Windows(12, 12)),
    PlanEntry("local-gru", "secure_fedgraph.papers.fedavg", "LocalGRU", "metr-la", windows=Windows(12, 12)),
    PlanEntry("fedavg-vector", "secure_fedgraph.papers.synthetic", "FedAvgVector"),
    PlanEntry("cnfgnn", "secure_fedgraph.papers.cnfgnn", "CNFGNN", "metr-la",
              why_not_resumable="its server's Graph Network and Adam state, each client's h_G,c,i and scheduled-sampling step, and "
                                "the DP accountant's history of releases are not saved at round boundaries, and a redone round would "
                                "upload every window's hidden states again with fresh noise (a second DP release)",
              privacy_option="dp_sigma", calibrates=True, attacked=True, centralised_method="gru+gn-centralised",
              windows=Windows(12, 12, stride_option="window_stride")),
    PlanEntry("fedstgd", "secure_fedgraph.papers.fedstgd", "FedSTGD", "hzmetro",
              why_not_resumable="each client's model, node embeddings (which never leave it), Adam and learning-rate schedule are "
                                "not saved at round boundaries",
              # distributed DP in every sum of the windows with DP-SGD at the same multiplier: one epsilon, which depends on the
              # clients that survive each sum, so no calibration
              privacy_option="ddp_noise", also_swept=("dpsgd_sigma",), windows=Windows(4, 4, within_day=True)),
    # reads a UEA archive (data/uea.py), checked when a client loads it
    PlanEntry("fedrel", "secure_fedgraph.papers.fedrel", "FedRel"),
    # preflight checks Cora's files; another dataset's when loaded
    PlanEntry("nfedgnn", "secure_fedgraph.papers.nfedgnn", "NFedGNN", "planetoid",
              why_not_resumable="each user's W_i and Adam state and the server's model and Adam state are not saved at round "
                                "boundaries, and a redone round would upload every h_i again with fresh noise (a second DP release)",
              privacy_option="dp_sigma", calibrates=True, attacked=True, centralised_method=PYG_CENTRALISED),
)
_BY_NAME = {entry.name: entry for entry in ENTRIES}
_BY_CLASS = {entry.cls: entry for entry in ENTRIES}
PLAN_NAMES = tuple(sorted(_BY_NAME))


def check_plan_name(name: str) -> None:
    """ConfigError naming the known plans, unless ``name`` is one (imports nothing)."""
    if name not in _BY_NAME:
        raise ConfigError(f"unknown plan {name!r}; known plans: {', '.join(PLAN_NAMES)}")


def plan_entry(name: str) -> PlanEntry:
    """Plan ``name``'s registration; ConfigError names the known plans otherwise (imports nothing)."""
    check_plan_name(name)
    return _BY_NAME[name]


def plans_where(predicate) -> tuple[str, ...]:
    """The sorted names of the plans whose entry passes ``predicate`` (imports nothing)."""
    return tuple(entry.name for entry in sorted(ENTRIES, key=lambda entry: entry.name) if predicate(entry))


def is_resumable(name: str) -> bool:
    """Whether plan ``name`` saves its state at every round boundary (False for a plan that is not
    registered, such as a test's own; imports nothing)."""
    entry = _BY_NAME.get(name)
    return entry is not None and entry.resumable


def check_resumable(name: str) -> None:
    """ConfigError saying why, unless plan ``name`` can be resumed (imports nothing)."""
    entry = plan_entry(name)
    if not entry.resumable:
        raise ConfigError(f"plan {name} cannot be resumed: {entry.why_not_resumable}; start the run again")


def plan_dataset(name: str) -> str | None:
    """The dataset plan ``name``'s clients read (imports nothing)."""
    return plan_entry(name).dataset


def plan_class(name: str) -> type[Plan]:
    """The plan called ``name``; ConfigError names the known plans otherwise."""
    entry = plan_entry(name)
    return getattr(importlib.import_module(entry.module), entry.cls)


def __getattr__(attribute: str) -> Any:
    """``from secure_fedgraph.papers import CNFGNN`` (and ``PLANS``, ``Plan``) import on first use."""
    if attribute in _BY_CLASS:
        return plan_class(_BY_CLASS[attribute].name)
    if attribute == "PLANS":
        return {name: plan_class(name) for name in PLAN_NAMES}
    if attribute == "Plan":
        return importlib.import_module("secure_fedgraph.papers.base").Plan
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")


__all__ = ["ENTRIES", "PLANS", "PLAN_NAMES", "Plan", "PlanEntry", "Windows", "CNFGNN", "FedAvgGRU", "FedAvgVector", "FedRel", "FedSTGD", "LocalGRU",
           "NFedGNN", "check_plan_name", "check_resumable", "is_resumable", "plan_class", "plan_dataset", "plan_entry", "plans_where"]
