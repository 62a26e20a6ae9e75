"""Find a dataset's files, and say exactly what is missing when they are not there."""

from __future__ import annotations

import os
from pathlib import Path

from secure_fedgraph.errors import DataNotFoundError

ENV_VAR = "SECURE_FEDGRAPH_DATA"


def data_root(data_dir: str | os.PathLike | None) -> Path | None:
    """The data directory: the argument if given, else $SECURE_FEDGRAPH_DATA, else None."""
    chosen = data_dir if data_dir is not None else os.environ.get(ENV_VAR)
    return Path(chosen).expanduser() if chosen else None


def require(root: Path, dataset: str, relative_paths: tuple[str, ...]) -> dict[str, Path]:
    """Paths of a dataset's files under ``root/dataset``.

    Raises:
        DataNotFoundError: naming the first missing file, where it was looked for, and how to
            point at the data (option, environment variable, the dataset's SOURCE.md).
    """
    folder = root / dataset
    found = {}
    for relative in relative_paths:
        path = folder / relative
        if not path.is_file():
            raise DataNotFoundError(
                f"{dataset}: missing file {relative!r}; looked for {path}. Put the dataset under "
                f"<data dir>/{dataset}/ (see ../shared/data/{dataset}/SOURCE.md for its origin and format) "
                f"and pass --data-dir or set {ENV_VAR}"
            )
        found[relative] = path
    return found
