"""Which dataset a client reads: a name the server announces, from the client's own data
directory, or a folder the client itself was given (``client --dataset``), never a folder the
server names (threat_model.md R-DATASET).

Why: the plan's ``dataset`` comes in the Welcome. A folder path there would have the client read
whatever graph series the server points it at on the client's disk (another project's, another
user's), train on it, and hand the server its aggregates.
"""

from __future__ import annotations

import os
from typing import Any

from secure_fedgraph.errors import ConfigError


def names_a_folder(dataset: str) -> bool:
    """A path (it has a separator, or starts with "." or "~"), not a dataset name."""
    return "/" in dataset or os.sep in dataset or dataset.startswith((".", "~"))


def own_dataset(plan_json: dict[str, Any], chosen: str | None) -> dict[str, Any]:
    """The announced plan (``{"plan": name, "config": {...}}``) with the dataset this client reads.

    Raises:
        ConfigError: the server names a folder and this client was given none, or this client was
            given a dataset other than the name the server announces.
    """
    announced = plan_json.get("config", {}).get("dataset")
    if not isinstance(announced, str):
        return plan_json
    if names_a_folder(announced):
        if chosen is None:
            raise ConfigError(f"the server's plan reads the folder {announced!r}: a client reads only a folder it was given "
                              "(start it with --dataset FOLDER, the folder of the same series on this machine)")
        return {**plan_json, "config": {**plan_json["config"], "dataset": chosen}}
    if chosen is not None and chosen != announced:
        raise ConfigError(f"the server's plan reads dataset {announced!r}; this client was started with --dataset {chosen}")
    return plan_json
