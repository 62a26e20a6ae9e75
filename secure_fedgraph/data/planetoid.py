"""Planetoid citation graphs (Cora, CiteSeer, PubMed) with the standard public split, as
nFedGNN uses them (one user per node).

Raw files (under ``<data dir>/planetoid/<Name>/raw/``, see ../shared/data/planetoid/SOURCE.md):
Planetoid's ``ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}``, read by PyG's own
``read_planetoid_data`` (the same tensors and masks as ``torch_geometric.datasets.Planetoid``,
without its download step or the ``processed/`` folder it writes next to the raw files).

The raw files are Python pickles, and unpickling runs code. Before PyG reads them, every file's
bytes are checked against the SHA-256 recorded here; a file with no recorded digest (PubMed's
``allx``, absent from the shared data) is loaded once with an unpickler that refuses every
global but numpy arrays, scipy's CSR matrix, ``defaultdict`` and ``list``. PyG then reads a
private copy of the bytes that were checked.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import io
import os
import pickle
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from secure_fedgraph.data.locate import ENV_VAR, data_root, require
from secure_fedgraph.errors import DataNotFoundError

DATASET = "planetoid"
NAMES = ("Cora", "CiteSeer", "PubMed")
PARTS = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
SHA256 = {  # ../shared/data/planetoid/SOURCE.md
    "CiteSeer/raw/ind.citeseer.allx": "2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668",
    "CiteSeer/raw/ind.citeseer.ally": "f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95",
    "CiteSeer/raw/ind.citeseer.graph": "d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7",
    "CiteSeer/raw/ind.citeseer.test.index": "2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4",
    "CiteSeer/raw/ind.citeseer.tx": "539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21",
    "CiteSeer/raw/ind.citeseer.ty": "55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce",
    "CiteSeer/raw/ind.citeseer.x": "d20de19150741e555de0ed037195630fc194114ebc7fd72ced62810148aa22f6",
    "CiteSeer/raw/ind.citeseer.y": "8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924",
    "Cora/raw/ind.cora.allx": "9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543",
    "Cora/raw/ind.cora.ally": "2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71",
    "Cora/raw/ind.cora.graph": "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d",
    "Cora/raw/ind.cora.test.index": "297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875",
    "Cora/raw/ind.cora.tx": "b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a",
    "Cora/raw/ind.cora.ty": "41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad",
    "Cora/raw/ind.cora.x": "23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab",
    "Cora/raw/ind.cora.y": "94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1",
    "PubMed/raw/ind.pubmed.ally": "0c37bbe3b5014ec365e9d393cf4791925e5ed94fb194305d74f064a8d7b50f0e",
    "PubMed/raw/ind.pubmed.graph": "5b89f0036ca22909471f1e6558eb42fa06e0c730a577bde5b058b40638f81dc9",
    "PubMed/raw/ind.pubmed.test.index": "b101d421688bbaecbd82e8a18f1e282378d6830f3a37666f28ebc47f844341b5",
    "PubMed/raw/ind.pubmed.tx": "4eb5f5d0f30f26497eb0ac6ac9719d09c67e284f1ed0385c93f3ef27a671da3d",
    "PubMed/raw/ind.pubmed.ty": "ee2e0d4819d9fbcc403689c3bf2e49face401b605932f093bc58ab6461130fdd",
    "PubMed/raw/ind.pubmed.x": "fbe9cb5c47200d1b7769a26e579be3b7130b556831f9d850e77c4c74f2599b33",
    "PubMed/raw/ind.pubmed.y": "e6c807633307a07ed659249006536a147c7999c797f11a2560752990181b41b3",
}


def raw_files(name: str) -> tuple[str, ...]:
    """The raw files of dataset ``name``, relative to ``<data dir>/planetoid``."""
    if name not in NAMES:
        raise DataNotFoundError(f"{DATASET}: unknown dataset {name!r}; one of {', '.join(NAMES)}")
    return tuple(f"{name}/raw/ind.{name.lower()}.{part}" for part in PARTS)


class _PlanetoidOnly(pickle.Unpickler):
    """Builds what Planetoid's pickles hold (numpy arrays, scipy CSR matrices, a dict of
    lists) and refuses every other global, so an unverified file cannot run code."""

    def find_class(self, module: str, name: str):
        allowed = {
            ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"), ("numpy", "ndarray"), ("numpy", "dtype"),
            ("scipy.sparse.csr", "csr_matrix"), ("scipy.sparse._csr", "csr_matrix"), ("collections", "defaultdict"), ("__builtin__", "list"),
            ("builtins", "list"),
        }
        if (module, name) not in allowed:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}: not part of a Planetoid file")
        if name == "_reconstruct":
            return np.ndarray.__reduce__(np.empty(0))[0]
        if name == "csr_matrix":
            from scipy.sparse import csr_matrix

            return csr_matrix
        return {"ndarray": np.ndarray, "dtype": np.dtype, "defaultdict": collections.defaultdict, "list": list}[name]


def _checked(relative: str, blob: bytes) -> None:
    """Raise unless ``blob`` is the recorded file, or (no digest recorded) a harmless pickle."""
    expected = SHA256.get(relative)
    if expected is not None:
        digest = hashlib.sha256(blob).hexdigest()
        if digest != expected:
            raise DataNotFoundError(f"{DATASET}: {relative} has sha256 {digest}, expected {expected} "
                                    f"(../shared/data/{DATASET}/SOURCE.md); not reading it")
    elif not relative.endswith("test.index"):
        try:
            _PlanetoidOnly(io.BytesIO(blob), encoding="latin1").load()
        except (pickle.UnpicklingError, EOFError, ValueError) as exc:
            raise DataNotFoundError(f"{DATASET}: {relative} (no recorded checksum) is not a Planetoid pickle: {exc}") from None


@dataclass(frozen=True)
class CitationGraph:
    """One Planetoid graph with its public split: node features ``x`` (N, F) float32 (as stored:
    binary bag of words for Cora and CiteSeer, TF-IDF for PubMed), ``edge_index`` (2, E)
    undirected, labels ``y`` (N,) and the train / val / test masks (Cora: 140 / 500 / 1000)."""

    name: str
    x: "torch.Tensor"  # noqa: F821 (torch is imported on load only)
    edge_index: "torch.Tensor"  # noqa: F821
    y: "torch.Tensor"  # noqa: F821
    train_mask: "torch.Tensor"  # noqa: F821
    val_mask: "torch.Tensor"  # noqa: F821
    test_mask: "torch.Tensor"  # noqa: F821

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    @property
    def num_classes(self) -> int:
        return int(self.y.max()) + 1

    @classmethod
    def check_files(cls, data_dir: str | os.PathLike | None, name: str = "Cora") -> dict[str, Path]:
        """The raw files' paths; DataNotFoundError naming the first missing one (reads none)."""
        root = data_root(data_dir)
        if root is None:
            raise DataNotFoundError(f"{DATASET}: no data directory; pass --data-dir or set {ENV_VAR} to the folder holding "
                                    f"{DATASET}/ (see ../shared/data/{DATASET}/SOURCE.md)")
        return require(root, DATASET, raw_files(name))

    @classmethod
    def load(cls, name: str = "Cora", data_dir: str | os.PathLike | None = None) -> CitationGraph:
        """Verify the raw files, then read them with PyG's Planetoid reader.

        Raises:
            DataNotFoundError: no data directory, a missing file (named), or a file that is
                not the recorded one.
        """
        from torch_geometric.io.planetoid import read_planetoid_data

        paths = cls.check_files(data_dir, name)
        with tempfile.TemporaryDirectory(prefix="planetoid-") as private:
            for relative, path in paths.items():
                blob = path.read_bytes()
                _checked(relative, blob)
                (Path(private) / Path(relative).name).write_bytes(blob)  # PyG reads exactly the bytes checked
            data = read_planetoid_data(private, name)
        return cls(name, data.x.contiguous(), data.edge_index, data.y, data.train_mask, data.val_mask, data.test_mask)


@functools.lru_cache(maxsize=4)
def load_cached(name: str, data_dir: str | None) -> CitationGraph:
    """:meth:`CitationGraph.load`, once per dataset, data directory and process: a process that
    hosts many nFedGNN users reads the files once and hands each user its own row."""
    return CitationGraph.load(name, data_dir)
