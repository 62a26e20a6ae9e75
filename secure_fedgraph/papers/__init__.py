"""The papers, each a round plan over the collectives (one module per paper), and the registry
the runtimes use to find a plan by name.

The registry names each plan's module, class and dataset without importing them, so the
command line can check a plan name and its data files before it imports torch; the classes
load on first use (``plan_class``, or an attribute of this package).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from secure_fedgraph.errors import ConfigError

if TYPE_CHECKING:
    from secure_fedgraph.papers.base import Plan

# plan name -> (module, class, the dataset its clients read: None, "metr-la", "hzmetro" or "planetoid")
REGISTRY: dict[str, tuple[str, str, str | None]] = {
    "fedavg-gru": ("secure_fedgraph.papers.fedavg", "FedAvgGRU", "metr-la"),
    "local-gru": ("secure_fedgraph.papers.fedavg", "LocalGRU", "metr-la"),
    "fedavg-vector": ("secure_fedgraph.papers.synthetic", "FedAvgVector", None),
    "cnfgnn": ("secure_fedgraph.papers.cnfgnn", "CNFGNN", "metr-la"),
    "fedstgd": ("secure_fedgraph.papers.fedstgd", "FedSTGD", "hzmetro"),
    "fedrel": ("secure_fedgraph.papers.fedrel", "FedRel", None),  # reads a UEA archive (data/uea.py), checked when a client loads it
    "nfedgnn": ("secure_fedgraph.papers.nfedgnn", "NFedGNN", "planetoid"),  # preflight checks Cora's files; another dataset's when loaded
}
PLAN_NAMES = tuple(sorted(REGISTRY))
# plans whose server and clients save their state at every round boundary (ctx.checkpoint), so
# `server --resume` can go on with them; every other plan is refused, with its reason if stated here
RESUMABLE = frozenset({"fedavg-gru", "local-gru", "fedavg-vector", "fedrel"})
WHY_NOT_RESUMABLE = {
    "cnfgnn": "its server's Graph Network and Adam state, each client's h_G,c,i and scheduled-sampling step, and the DP "
              "accountant's history of releases are not saved at round boundaries, and a redone round would upload every window's "
              "hidden states again with fresh noise (a second DP release)",
    "nfedgnn": "each user's W_i and Adam state and the server's model and Adam state are not saved at round boundaries, and a "
               "redone round would upload every h_i again with fresh noise (a second DP release)",
    "fedstgd": "each client's model, node embeddings (which never leave it), Adam and learning-rate schedule are not saved "
               "at round boundaries",
}
# plans whose privacy budget `secure-fedgraph sweep` can vary: the option holding the noise multiplier
# (cnfgnn: DP on the uploaded hidden states; fedavg-gru: distributed DP inside the FedAvg sum)
PRIVACY_OPTION = {"cnfgnn": "dp_sigma", "fedavg-gru": "ddp_noise", "nfedgnn": "dp_sigma"}
# plans that calibrate that option to a target epsilon before a run (`sweep --epsilons`, `run --target-epsilon`):
# fedavg-gru's ddp_noise is not one, its epsilon depends on how many clients survive each sum
CALIBRATES_PRIVACY_OPTION = frozenset({"cnfgnn", "nfedgnn"})
# plans whose uploads the audit attacks (secure_fedgraph/audit/attacks/: what `sweep --attacks` draws per epsilon);
# tests/audit/test_leakage_attacks.py checks it against the attacks' own plans
ATTACKED_PLANS = frozenset({"cnfgnn", "nfedgnn"})
# the centralised baseline a sweep draws beside a plan (runs/comparison.py's method names)
CENTRALISED_METHOD = {"cnfgnn": "gru+gn-centralised", "fedavg-gru": "gru-centralised"}
_CLASSES = {cls: (module, name) for name, (module, cls, _) in REGISTRY.items()}


def check_plan_name(name: str) -> None:
    """ConfigError naming the known plans, unless ``name`` is one (imports nothing)."""
    if name not in REGISTRY:
        raise ConfigError(f"unknown plan {name!r}; known plans: {', '.join(PLAN_NAMES)}")


def check_resumable(name: str) -> None:
    """ConfigError saying why, unless plan ``name`` can be resumed (imports nothing)."""
    check_plan_name(name)
    if name not in RESUMABLE:
        why = WHY_NOT_RESUMABLE.get(name, "it does not save its state at round boundaries")
        raise ConfigError(f"plan {name} cannot be resumed: {why}; start the run again")


def plan_dataset(name: str) -> str | None:
    """The dataset plan ``name``'s clients read (imports nothing)."""
    check_plan_name(name)
    return REGISTRY[name][2]


def plan_class(name: str) -> type[Plan]:
    """The plan called ``name``; ConfigError names the known plans otherwise."""
    check_plan_name(name)
    module, cls, _ = REGISTRY[name]
    return getattr(importlib.import_module(module), cls)


def __getattr__(attribute: str) -> Any:
    """``from secure_fedgraph.papers import CNFGNN`` (and ``PLANS``, ``Plan``) import on first use."""
    if attribute in _CLASSES:
        module, _ = _CLASSES[attribute]
        return getattr(importlib.import_module(module), attribute)
    if attribute == "PLANS":
        return {name: plan_class(name) for name in PLAN_NAMES}
    if attribute == "Plan":
        return importlib.import_module("secure_fedgraph.papers.base").Plan
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")


__all__ = ["PLANS", "PLAN_NAMES", "REGISTRY", "RESUMABLE", "Plan", "CNFGNN", "FedAvgGRU", "FedAvgVector", "FedSTGD", "LocalGRU", "NFedGNN",
           "check_plan_name", "check_resumable", "plan_class", "plan_dataset"]
