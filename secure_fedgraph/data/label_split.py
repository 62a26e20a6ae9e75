"""Splitting labelled cases among K participants, IID or not (FedRel's "partial non-IID" set-up).

Every function is pure: labels and a numpy generator in, one sorted index array per participant
out, each case at exactly one participant.

- ``class``: partial non-IID, generalising STFL's split (``utils.py: niid_split_mask``: 5
  participants, each taking thirds of 3 adjacent sleep stages): participant k holds the
  ceil(C / K) + 1 classes that start at floor(k C / K), cyclically, and every class's cases
  are divided evenly among the participants that hold it. Every class is held by someone;
  neighbouring participants share a class.
- ``disjoint``: each class wholly at one participant, contiguous blocks of classes
  (JapaneseVowels' classes are its 9 speakers, so this is its split by speaker).
- ``iid``: a random permutation dealt round robin.
"""

from __future__ import annotations

import math

import numpy as np

from secure_fedgraph.errors import ConfigError

SPLITS = ("class", "disjoint", "iid")


def class_holders(n_classes: int, n_parts: int) -> list[list[int]]:
    """For every participant, the classes it holds in the ``class`` split."""
    if n_parts == 1:
        return [list(range(n_classes))]
    width = min(n_classes, math.ceil(n_classes / n_parts) + 1)
    return [[(k * n_classes // n_parts + j) % n_classes for j in range(width)] for k in range(n_parts)]


def split_cases(labels: np.ndarray, *, parts: int, how: str, n_classes: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Indices of the cases each of ``parts`` participants holds.

    Raises:
        ConfigError: an unknown split, more parts than ``disjoint`` has classes, or a
            participant left without a case.
    """
    labels = np.asarray(labels)
    if how not in SPLITS:
        raise ConfigError(f"split must be one of {SPLITS}, got {how!r}")
    held: list[list[int]] = [[] for _ in range(parts)]
    if how == "iid":
        for i, case in enumerate(rng.permutation(len(labels))):
            held[i % parts].append(int(case))
    elif how == "disjoint":
        if parts > n_classes:
            raise ConfigError(f"a disjoint split gives each participant whole classes: at most {n_classes} participants, got {parts}")
        for c in range(n_classes):
            held[c * parts // n_classes].extend(int(i) for i in np.flatnonzero(labels == c))
    else:
        holders: dict[int, list[int]] = {c: [] for c in range(n_classes)}
        for k, classes in enumerate(class_holders(n_classes, parts)):
            for c in classes:
                holders[c].append(k)
        for c, who in holders.items():
            cases = rng.permutation(np.flatnonzero(labels == c))
            for share, k in zip(np.array_split(cases, len(who)), who):
                held[k].extend(int(i) for i in share)
    for k, cases in enumerate(held):
        if not cases:
            raise ConfigError(f"the {how!r} split leaves participant {k} of {parts} without a case; use fewer participants")
    return [np.array(sorted(cases), dtype=np.int64) for cases in held]
