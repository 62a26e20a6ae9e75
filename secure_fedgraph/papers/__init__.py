"""The papers, each a round plan over the collectives (one module per paper), and the registry
the runtimes use to find a plan by name."""

from secure_fedgraph.papers.base import Plan
from secure_fedgraph.papers.cnfgnn import CNFGNN
from secure_fedgraph.papers.fedavg import FedAvgGRU, LocalGRU
from secure_fedgraph.papers.fedstgd import FedSTGD
from secure_fedgraph.papers.synthetic import FedAvgVector

PLANS: dict[str, type[Plan]] = {cls.name: cls for cls in (FedAvgGRU, LocalGRU, FedAvgVector, CNFGNN, FedSTGD)}


def plan_class(name: str) -> type[Plan]:
    """The plan called ``name``; ConfigError names the known plans otherwise."""
    from secure_fedgraph.errors import ConfigError

    try:
        return PLANS[name]
    except KeyError:
        raise ConfigError(f"unknown plan {name!r}; known plans: {', '.join(sorted(PLANS))}") from None


__all__ = ["PLANS", "Plan", "CNFGNN", "FedAvgGRU", "FedAvgVector", "FedSTGD", "LocalGRU", "plan_class"]
