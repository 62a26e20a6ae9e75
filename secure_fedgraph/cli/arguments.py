"""argparse pieces the commands share: one-line usage errors, repeatable options, and option types
that check a value (secure_fedgraph.validation's wording) while parsing, before anything is imported."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.validation import positive, positive_number

if TYPE_CHECKING:  # imports torch: the handlers import it, after the checks
    from secure_fedgraph.protocol.engine.progress import StepReporter


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the command's --help (argparse prints the
    whole usage block first, which for ``run`` or ``server`` is a screenful above the error)."""

    def error(self, message: str) -> NoReturn:  # argparse's hook: it must not return
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


class Repeatable(argparse.Action):
    """A repeatable option whose default list the first use replaces (argparse's ``append``
    would add to it), so defaults are declared once, in the parser."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        current = getattr(namespace, self.dest)
        setattr(namespace, self.dest, [*([] if current is self.default else current), values])


class WithoutDefaults:
    """An argument group whose options have no default: parsed, it holds only what was given."""

    def __init__(self, group) -> None:
        self.group = group

    def add_argument(self, *names, **options):
        return self.group.add_argument(*names, **{**options, "default": argparse.SUPPRESS})


def checked(kind: type, check: Callable[[Any], object]) -> Callable[[str], Any]:
    """An argparse type: ``kind(text)`` passing ``check`` (secure_fedgraph.validation's wording),
    so a bad value is argparse's one-line usage error, exit 2, before anything is imported."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
        try:
            check(value)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value

    return parse


def count(minimum: int = 1) -> Callable[[str], int]:
    """An int >= ``minimum``."""
    return checked(int, lambda value: positive("value", value, minimum))


def positive_float(*, zero_ok: bool = False) -> Callable[[str], float]:
    """A finite number > 0 (>= 0 with ``zero_ok``): timeouts, sizes, noise multipliers."""
    return checked(float, lambda value: positive_number("value", value, zero_ok=zero_ok))


def multiple_of_10(text: str) -> int:
    """A positive multiple of 10 (sum-demo's --size: each client holds a (size/10, 10) weight matrix)."""
    value = count()(text)
    if value % 10:
        raise argparse.ArgumentTypeError(f"value must be a positive multiple of 10, got {value}")
    return value


def numbers(option: str, text: str, kind: type, check: Callable[[Any], object]) -> list:
    """``--option A,B,...``: a list of ``kind`` values, each passing ``check`` (ConfigError: one line, exit 2)."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    try:
        values = [kind(part) for part in parts]
    except ValueError:
        raise ConfigError(f"{option} must be a comma-separated list of {'integers' if kind is int else 'numbers'}, got {text!r}") from None
    if not values:
        raise ConfigError(f"{option} names no value")
    for value in values:
        try:
            check(value)
        except ConfigError as exc:
            raise ConfigError(f"{option}: {exc}") from None
    return values


DATASET_HELP = ("the graph series the plan reads: a name (metr-la, pems-bay, hzmetro, nycbike1: <data dir>/NAME/ in that dataset's "
                "own layout) or PATH, a graph-series folder (docs/data.md); default the plan's own (cnfgnn, fedavg-gru, local-gru: "
                "metr-la; fedstgd: hzmetro); the same as --set dataset=...")


def add_dataset_option(parser: argparse.ArgumentParser) -> None:
    """``--dataset NAME|PATH`` for the commands that run traffic plans (checked by
    cli/plans.py: check_plan_data before anything heavy is imported)."""
    parser.add_argument("--dataset", default=None, metavar="NAME|PATH", help=DATASET_HELP)


def add_progress_options(parser: argparse.ArgumentParser) -> None:
    """``--quiet`` and ``--log-format``, for the commands that run plans (``run``, ``server``): how
    the progress within a round shows on stderr (protocol/engine/progress.py); stdout keeps its lines."""
    parser.add_argument("--quiet", action="store_true",
                        help="no progress within a round on stderr (the per-round lines on stdout stay)")
    parser.add_argument("--log-format", choices=["text", "json"], default="text",
                        help="progress within a round: text (a live bar on a terminal, else a line at most every 10 s of a step past "
                             "5 s) or json (such lines as JSON objects: stage, phase, round, answered, asked, seconds); default text")


def progress_from_args(args: argparse.Namespace) -> StepReporter | None:
    """The progress reporter ``add_progress_options`` asked for (None with ``--quiet``); imported
    in the handler, after the checks."""
    from secure_fedgraph.protocol.engine.progress import step_reporter

    return step_reporter(quiet=args.quiet, json_lines=args.log_format == "json")
