"""A plan from the command line (its name, ``--set KEY=VALUE``, the DP options, ``--target-epsilon``)
and the one-line summary of a finished run's test metrics, shared by ``run``, ``server`` and ``sweep``."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from secure_fedgraph.errors import ConfigError

if TYPE_CHECKING:  # the plans import torch: the handlers import them, after the checks
    from secure_fedgraph.data.graph_series import SeriesLayout
    from secure_fedgraph.papers.base import Plan


def set_item(item: str, fields: Collection[str]) -> tuple[str, object]:
    """One ``--set KEY=VALUE``: KEY must be one of ``fields``; VALUE is JSON where it looks like it."""
    key, sep, raw = item.partition("=")
    if not sep or key not in fields:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE with KEY one of {', '.join(sorted(fields))}")
    try:
        return key, _set_value(raw)
    except ValueError:  # "1x": looks like a number, is not one
        raise ConfigError(f"--set {item!r}: {raw!r} is not a value (a number, true, false, none, a JSON list or object, or text "
                          "that does not begin like one)") from None


def _set_value(raw: str) -> object:
    if raw.lower() in ("none", "true", "false"):
        return json.loads(raw.lower().replace("none", "null"))
    return json.loads(raw) if raw[:1].isdigit() or raw[:1] in "-[{" else raw


def given_options(args: argparse.Namespace) -> dict[str, object]:
    """The plan options ``--set`` gives, by key (the last of each wins, as in the plan), read
    without the plan's class (no torch); a value that does not parse is left to the plan's checks."""
    given = {}
    for item in getattr(args, "set", None) or []:
        key, sep, raw = item.partition("=")
        if sep:
            try:
                given[key] = _set_value(raw)
            except ValueError:
                given.pop(key, None)
    return given


def plan_from_args(args: argparse.Namespace) -> Plan:
    """The plan ``args.plan`` configured by the command line's plan options (calibrated to
    ``--target-epsilon`` where given)."""
    from secure_fedgraph.papers import plan_class

    cls = plan_class(args.plan)
    fields = {f.name: f for f in dataclasses.fields(cls.Config)}
    values = dict(set_item(item, fields) for item in args.set or [])
    if args.clients is not None:
        values[cls.clients_field] = args.clients
    if getattr(args, "dataset", None) is not None:
        if "dataset" not in fields:
            raise ConfigError(f"--dataset: plan {cls.name} reads no graph series (cnfgnn, fedavg-gru, local-gru and fedstgd do)")
        values["dataset"] = args.dataset
    for option, key in (("rounds", "rounds"), ("dp_sigma", "dp_sigma"), ("dp_clip", "dp_clip"), ("dpsgd_sigma", "dpsgd_sigma"),
                        ("dpsgd_clip", "dpsgd_clip")):
        value = getattr(args, option, None)
        if value is not None:
            if key not in fields:
                raise ConfigError(f"--{option.replace('_', '-')}: plan {cls.name} has no option {key!r}")
            values[key] = value
    plan = cls(cls.Config(**values))
    if getattr(args, "target_epsilon", None) is not None:
        plan = plan.calibrated(args.target_epsilon, data_dir=args.data_dir, option=args.calibrate)
        print(f"{args.command}: --target-epsilon {args.target_epsilon:g} calibrates the noise: {_calibrated_noise(plan)}")
    return plan


def chosen_dataset(args: argparse.Namespace) -> str | None:
    """The dataset the command line names: ``--dataset``, else ``--set dataset=...``, else None."""
    if getattr(args, "dataset", None) is not None:
        return args.dataset
    for item in getattr(args, "set", None) or []:
        key, sep, value = item.partition("=")
        if sep and key == "dataset":
            return value
    return None


def check_plan_data(args: argparse.Namespace, *, files: bool = True) -> None:
    """Preflight (no torch): the plan's dataset reads and checks (``files``; read once per process,
    so the run that follows reads it from memory; the server reads only what it holds itself, so
    it checks the name or folder alone), ``--clients`` is at most its nodes, and the plan's windows
    fit in it (:func:`check_windows`, where its sizes are known); each mistake one line naming the
    file or option (exit 2)."""
    from secure_fedgraph.data import DATASETS
    from secure_fedgraph.data.sources import NAMES, known_layout, node_count, resolve, validate
    from secure_fedgraph.papers import plan_dataset

    default = plan_dataset(args.plan)
    if default in NAMES:  # a plan over graph series
        dataset = chosen_dataset(args) or default
        series = validate(dataset, args.data_dir) if files else None
        if not files:
            resolve(dataset, args.data_dir)
        clients, nodes = getattr(args, "clients", None), node_count(dataset)
        if clients is not None and clients > nodes:
            raise ConfigError(f"--clients {clients}: dataset {dataset} has {nodes} nodes (at most one client per node)")
        layout = series.layout if series is not None else known_layout(dataset)
        if layout is not None:  # the server of a dataset only its clients hold cannot know its sizes: they check them
            check_windows(args.plan, dataset, layout, given_options(args))
    elif getattr(args, "dataset", None) is not None:  # fedrel and nfedgnn name their own datasets with --set dataset=...
        raise ConfigError(f"--dataset: plan {args.plan} reads no graph series (cnfgnn, fedavg-gru, local-gru and fedstgd do)")
    elif default is not None and files:
        DATASETS[default].check_files(args.data_dir)


def check_windows(plan: str, dataset: str, layout: SeriesLayout, given: Mapping[str, object]) -> None:
    """Preflight (no torch): the windows of ``plan`` (its ``steps_in`` and ``steps_out``, from
    ``given`` ``--set`` options or the plan's defaults; papers/__init__.py: Windows) fit in
    ``dataset`` of sizes ``layout`` (data/windows.py). One line naming the options (or, where
    none was given, ``--dataset``) and the longest window the data hold.

    Raises:
        ConfigError: windows longer than the data allow.
    """
    from secure_fedgraph.data.windows import MIN_SLIDING_WINDOWS, longest_sliding_window, sliding_windows
    from secure_fedgraph.papers import plan_entry

    rule = plan_entry(plan).windows
    if rule is None:
        return
    steps_in, steps_out = given.get("steps_in", rule.steps_in), given.get("steps_out", rule.steps_out)
    stride = given.get(rule.stride_option, 1) if rule.stride_option else 1
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (steps_in, steps_out, stride)):
        return  # the plan's own checks name a value that is not a count
    named = [f"--set {key}={given[key]}" for key in ("steps_in", "steps_out") if key in given]
    what = " ".join(named) if named else f"--dataset {dataset} (steps_in {steps_in} and steps_out {steps_out} by default)"
    length = steps_in + steps_out
    if rule.within_day:
        if length > layout.steps_per_day:
            raise ConfigError(f"{what}: a window of {steps_in} + {steps_out} steps does not fit in a day of {dataset} ({layout.steps_per_day} "
                              f"steps; {plan}'s windows stay within a day): steps_in + steps_out must be at most {layout.steps_per_day}")
        return
    found = sliding_windows(layout, length, stride)
    if found < MIN_SLIDING_WINDOWS:
        longest = longest_sliding_window(layout, stride)
        spaced = f" every {stride} steps (--set {rule.stride_option}={stride})" if stride > 1 else ""
        days = "" if layout.contiguous else f" ({layout.steps_per_day} a day, no window across days)"
        if longest:
            limit = f"steps_in + steps_out must be at most {longest}"
        else:
            limit = f"no window length does at that spacing: lower {rule.stride_option}" if stride > 1 else "the series is too short"
        raise ConfigError(f"{what}: the {layout.steps} steps of {dataset}{days} hold {found} windows of {steps_in} + {steps_out} steps{spaced}, "
                          f"and {plan} needs at least {MIN_SLIDING_WINDOWS}: {limit}")


def _calibrated_noise(plan: Plan) -> str:
    config = plan.config
    return ", ".join(f"{key} {getattr(config, key):.4g}" for key in ("dp_sigma", "dpsgd_sigma") if getattr(config, key, 0))


def has_test_metrics(metrics: dict) -> bool:
    """Whether a run reports test metrics (a plan that only trains does not)."""
    return "test_rmse" in metrics or "test_acc" in metrics


def test_summary(metrics: dict) -> str:
    """A run's test metrics in one line: accuracy for the classifiers, RMSE and MAE for the forecasters."""
    if "best_val_test_acc" in metrics:  # node classification (nfedgnn)
        if metrics["test_acc"] is None:
            return f"training loss {metrics['rounds'][-1]['train_loss']:.4f} in the last round (no test node among the run's users)"
        return (f"test accuracy {metrics['test_acc']:.3f} ({metrics['best_val_test_acc']:.3f} at the best validation round, "
                f"{metrics['best_val_round']})")
    if "test_acc" in metrics:  # classification (fedrel)
        return f"test accuracy {metrics['test_acc']:.3f}, macro-F1 {metrics['test_f1']:.3f} (best {metrics['best_f1']:.3f} at round {metrics['best_f1_round']})"
    mape = f", MAPE {metrics['test_mape']:.2f}%" if "test_mape" in metrics else ""
    return f"test RMSE {metrics['test_rmse']:.3f}, MAE {metrics['test_mae']:.3f}{mape}"
