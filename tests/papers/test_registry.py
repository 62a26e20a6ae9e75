"""Each plan's one registration (secure_fedgraph/papers/__init__.py: PlanEntry) says what its
module does: the class loads and has the entry's name, a resumable plan checkpoints both sides,
the privacy option is a field of its config, and attacked plans are the audit's attacks' own."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.papers import ENTRIES, PLAN_NAMES, PlanEntry, check_resumable, is_resumable, plan_class, plan_dataset, plan_entry
from secure_fedgraph.papers.base import Plan

DATASETS = (None, "metr-la", "hzmetro", "planetoid")


def test_every_plan_is_registered_once_and_the_names_are_the_entries():
    assert len({entry.name for entry in ENTRIES}) == len(ENTRIES) and PLAN_NAMES == tuple(sorted(entry.name for entry in ENTRIES))
    assert len({(entry.module, entry.cls) for entry in ENTRIES}) == len(ENTRIES)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda entry: entry.name)
def test_the_entry_matches_its_plan(entry: PlanEntry):
    cls = plan_class(entry.name)
    assert issubclass(cls, Plan) and cls.__name__ == entry.cls and cls.name == entry.name
    assert entry.dataset in DATASETS and plan_dataset(entry.name) == entry.dataset
    fields = {f.name for f in dataclasses.fields(cls.Config)}
    assert cls.clients_field in fields
    if entry.privacy_option is not None:
        assert entry.privacy_option in fields
        assert getattr(cls(), entry.privacy_option) == 0  # the plan's property the clients' floors read: off by default
    assert set(entry.also_swept) <= fields and all(getattr(cls().config, option) == 0 for option in entry.also_swept)
    if entry.calibrates:
        assert cls.calibrated is not Plan.calibrated
    # the windows the command line checks against the data before torch loads are the plan's own defaults
    defaults = {f.name: f.default for f in dataclasses.fields(cls.Config)}
    if entry.windows is None:
        assert "steps_in" not in fields and "steps_out" not in fields
    else:
        assert (defaults["steps_in"], defaults["steps_out"]) == (entry.windows.steps_in, entry.windows.steps_out)
        assert entry.windows.stride_option is None or defaults[entry.windows.stride_option] == 1
    # both sides of a resumable plan start from ctx.resume_from and save at ctx.checkpoint; no other plan does
    sources = [inspect.getsource(getattr(cls, side)) for side in ("server", "client")]
    for source in sources:
        assert ("ctx.resume_from(" in source and "ctx.checkpoint(" in source) == entry.resumable, entry.name
    assert is_resumable(entry.name) == entry.resumable


def test_a_plan_that_is_not_resumable_says_why_and_an_unknown_one_is_named():
    for entry in ENTRIES:
        if entry.resumable:
            check_resumable(entry.name)
        else:
            with pytest.raises(ConfigError, match=f"plan {entry.name} cannot be resumed: {entry.why_not_resumable[:20]}"):
                check_resumable(entry.name)
    with pytest.raises(ConfigError, match="unknown plan 'nope'; known plans: cnfgnn, fedavg-gru"):
        plan_entry("nope")
    assert not is_resumable("nope")  # a test's own plan: not registered, so not resumable


def test_the_centralised_baselines_are_comparison_methods_or_the_whole_graph_pyg_model():
    from secure_fedgraph.papers import PYG_CENTRALISED
    from secure_fedgraph.runs.comparison import METHODS

    for entry in ENTRIES:
        assert entry.centralised_method in (None, PYG_CENTRALISED, *METHODS)
    assert PYG_CENTRALISED not in METHODS  # the sweep tells the two kinds apart by name


def test_an_entry_that_calibrates_names_its_option():
    with pytest.raises(ConfigError, match="plan p: calibrates=True needs a privacy_option"):
        PlanEntry("p", "m", "C", calibrates=True)
    with pytest.raises(ConfigError, match="plan p: also_swept needs a privacy_option"):
        PlanEntry("p", "m", "C", also_swept=("dpsgd_sigma",))
    assert PlanEntry("p", "m", "C", privacy_option="ddp_noise", also_swept=("dpsgd_sigma",)).swept == ("ddp_noise", "dpsgd_sigma")
