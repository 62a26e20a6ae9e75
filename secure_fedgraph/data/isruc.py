"""ISRUC-Sleep subgroup III's channel graph: the only part of FedRel's ISRUC_S3 data set that is
obtainable here (its signals are not; ../shared/data/isruc_s3/SOURCE.md).

``DistanceMatrix.npy`` (MSTGCN, also in STFL) is a (10, 10) float64 adjacency between the 10
PSG channels C3_A2, C4_A1, F3_A2, F4_A1, O1_A2, O2_A1, LOC_A2, ROC_A1, X1, X2, row-stochastic
and asymmetric: the shape and kind of matrix eq. 7 of FedRel learns per graph, and what STFL's
``distance`` option uses as a fixed adjacency. Its SHA-256 is checked before numpy reads it,
and numpy reads it without pickles.
"""

from __future__ import annotations

import hashlib
import io
import os

import numpy as np

from secure_fedgraph.data.locate import ENV_VAR, data_root, require
from secure_fedgraph.errors import DataNotFoundError

DATASET = "isruc_s3"
CHANNELS = ("C3_A2", "C4_A1", "F3_A2", "F4_A1", "O1_A2", "O2_A1", "LOC_A2", "ROC_A1", "X1", "X2")
SHA256 = {"DistanceMatrix.npy": "6fb9895f1026c5ab537f53b1065ff497ef3b5350422759accce8bf1adf6faff8"}


def isruc_channel_graph(data_dir: str | os.PathLike | None = None) -> np.ndarray:
    """The (10, 10) channel adjacency, rows summing to 1, float32.

    Raises:
        DataNotFoundError: no data directory, the file missing (named), a checksum mismatch, or
            a matrix of another shape or not row-stochastic.
    """
    root = data_root(data_dir)
    if root is None:
        raise DataNotFoundError(f"{DATASET}: no data directory; pass --data-dir or set {ENV_VAR} (see ../shared/data/{DATASET}/SOURCE.md)")
    path = require(root, DATASET, tuple(SHA256))["DistanceMatrix.npy"]
    blob = path.read_bytes()
    digest = hashlib.sha256(blob).hexdigest()
    if digest != SHA256["DistanceMatrix.npy"]:
        raise DataNotFoundError(f"{DATASET}: {path} has sha256 {digest}, expected {SHA256['DistanceMatrix.npy']} (../shared/data/{DATASET}/SOURCE.md)")
    matrix = np.load(io.BytesIO(blob), allow_pickle=False)
    if matrix.shape != (len(CHANNELS), len(CHANNELS)) or not np.allclose(matrix.sum(axis=1), 1.0, atol=1e-6):
        raise DataNotFoundError(f"{path}: expected a row-stochastic ({len(CHANNELS)}, {len(CHANNELS)}) matrix, got shape {matrix.shape}")
    return matrix.astype(np.float32)
