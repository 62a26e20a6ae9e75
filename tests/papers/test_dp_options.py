"""The DP, DP-SGD and distributed DP options (secure_fedgraph/papers/dp_options.py) are declared
and checked once: every plan config with one of their fields has the whole group, its defaults
and its checks."""

from __future__ import annotations

import dataclasses

import pytest

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.papers import PLAN_NAMES, plan_class
from secure_fedgraph.papers.dp_options import (
    DDPNoise,
    DDPOptions,
    DeltaOption,
    DPOptions,
    DPSGDOptions,
    PrivacyOptions,
    WindowDDPOptions,
)

GROUPS = (DPOptions, DPSGDOptions, DDPNoise, DDPOptions, WindowDDPOptions, DeltaOption)
BAD = {"dp_sigma": -1.0, "dp_clip": 0.0, "dp_delta": 1.0, "dpsgd_sigma": float("nan"), "dpsgd_clip": -2.0, "ddp_noise": -0.5,
       "ddp_clip": 0, "ddp_delta": True, "ddp_gradient_clip": -1e-4, "ddp_reading_clip": 0.0, "ddp_error_clip": float("inf")}
MESSAGE = {"dp_delta": "dp_delta must be a float in (0, 1), got 1.0", "ddp_delta": "ddp_delta must be a number in (0, 1), got True"}
CONFIGS = {name: plan_class(name).Config for name in PLAN_NAMES}


def _names(group: type) -> set[str]:
    return {f.name for f in dataclasses.fields(group)}


@pytest.mark.parametrize("plan", PLAN_NAMES)
def test_a_config_with_a_groups_field_has_the_group(plan):
    config = CONFIGS[plan]
    fields = {f.name for f in dataclasses.fields(config)}
    for field, group in (("dp_sigma", DPOptions), ("dpsgd_sigma", DPSGDOptions), ("ddp_noise", DDPNoise), ("ddp_delta", DDPOptions),
                         ("ddp_gradient_clip", WindowDDPOptions), ("dp_delta", DeltaOption)):
        assert issubclass(config, group) == (field in fields), (plan, field)
    assert {name for name in BAD if name in fields} == set().union(*(_names(g) for g in GROUPS if issubclass(config, g)))


@pytest.mark.parametrize(("plan", "field"), [(plan, field) for plan in PLAN_NAMES for field in BAD if field in _names(CONFIGS[plan])])
def test_every_config_runs_the_shared_checks(plan, field):
    message = MESSAGE.get(field, f"{field} must be a finite number")
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        CONFIGS[plan](**{field: BAD[field]})


def test_the_checks_are_the_base_groups_only():
    """One set of checks: no group adds a __post_init__ of its own."""
    assert all(group.__post_init__ is PrivacyOptions.__post_init__ for group in GROUPS)


def test_the_defaults_are_the_plans_ones():
    defaults = {name: {f.name: f.default for f in dataclasses.fields(config) if f.name in BAD} for name, config in CONFIGS.items()}
    assert defaults["cnfgnn"] == {"dp_sigma": 0.0, "dp_clip": 2.0, "dp_delta": 1e-5, "dpsgd_sigma": 0.0, "dpsgd_clip": 1.0}
    assert defaults["nfedgnn"] == {"dp_sigma": 0.0, "dp_clip": 1.0, "dp_delta": 1e-5}
    assert defaults["fedavg-gru"] == defaults["local-gru"] == {"dpsgd_sigma": 0.0, "dpsgd_clip": 1.0, "dp_delta": 1e-5, "ddp_noise": 0.0,
                                                               "ddp_clip": 1.0, "ddp_delta": 1e-5}
    assert defaults["fedrel"] == {"dpsgd_sigma": 0.0, "dpsgd_clip": 1.0, "dp_delta": 1e-5}
    assert defaults["fedstgd"] == {"dpsgd_sigma": 0.0, "dpsgd_clip": 1.0, "dp_delta": 1e-5, "ddp_noise": 0.0, "ddp_clip": 20.0,
                                   "ddp_gradient_clip": 1e-4, "ddp_reading_clip": 2000.0, "ddp_error_clip": 2.0}
    assert defaults["fedavg-vector"] == {"ddp_noise": 0.0, "ddp_clip": 1.0, "ddp_delta": 1e-5}
