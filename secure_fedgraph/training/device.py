"""Which torch device a run computes on: CPU by default (one thread, reproducible), CUDA when
asked for or, with "auto", when present."""

from __future__ import annotations

import torch

from secure_fedgraph.errors import ConfigError

DEVICES = ("auto", "cpu", "cuda")


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
