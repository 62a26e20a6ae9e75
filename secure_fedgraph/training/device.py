"""Which torch device a run computes on: CPU by default (one thread, reproducible), CUDA when
asked for or, with "auto", when present."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from secure_fedgraph.errors import ConfigError

DEVICES = ("auto", "cpu", "cuda")


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """One torch thread inside, the caller's count restored after: BLAS results can depend on
    the thread count, and a run must give the same numbers in one process (where many
    clients share a thread) as across processes. The hosts that run plan code hold it
    (protocol/engine/contexts.py's ClientHost, protocol/core/steps.py's drive), never across a yield."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def check_device(name: str, device: str) -> None:
    """A config's device option is one of :data:`DEVICES` (whether CUDA is present is checked when used)."""
    if device not in DEVICES:
        raise ConfigError(f"{name} must be one of {DEVICES}, got {device!r}")


def resolve_device(device: str) -> torch.device:
    """The torch device for a config's ``device`` ("auto": CUDA when available, else CPU).

    Raises:
        ConfigError: an unknown name, or "cuda" on a machine without CUDA.
    """
    check_device("device", device)
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' was asked for but torch.cuda.is_available() is False; use 'auto' or 'cpu'")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)
