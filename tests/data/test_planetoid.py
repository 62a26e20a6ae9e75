"""Planetoid (Cora, CiteSeer): the public split as PyG gives it, read only after the raw
pickles are verified (a tampered pickle would run code when unpickled)."""

from __future__ import annotations

import pickle
import shutil

import pytest
import torch

from secure_fedgraph.data import planetoid
from secure_fedgraph.data.planetoid import CitationGraph
from secure_fedgraph.errors import DataNotFoundError
from tests.helpers import PLANETOID_DIR as DATA_DIR, defence_stops, needs_planetoid


@needs_planetoid
@pytest.mark.parametrize("name,nodes,features,classes,edges", [("Cora", 2708, 1433, 7, 10556), ("CiteSeer", 3327, 3703, 6, 9104)])
def test_the_public_split_equals_pyg_planetoid(name, nodes, features, classes, edges, tmp_path):
    from torch_geometric.datasets import Planetoid

    graph = CitationGraph.load(name, DATA_DIR)
    assert graph.x.shape == (nodes, features) and graph.edge_index.shape == (2, edges) and graph.num_classes == classes
    assert [int(m.sum()) for m in (graph.train_mask, graph.val_mask, graph.test_mask)] == [20 * classes, 500, 1000]
    shutil.copytree(DATA_DIR / "planetoid" / name, tmp_path / name)  # PyG writes processed/ next to raw/
    reference = Planetoid(str(tmp_path), name)[0]
    for field in ("x", "edge_index", "y", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(graph, field), getattr(reference, field)), field


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(DataNotFoundError, match=r"missing file 'PubMed/raw/ind.pubmed.x'"):
        CitationGraph.load("PubMed", tmp_path)
    with pytest.raises(DataNotFoundError, match="unknown dataset 'Pubmed'"):
        CitationGraph.load("Pubmed", tmp_path)


class _RunsCode:
    """A pickle that touches a file when unpickled: what a tampered data file could do."""

    def __init__(self, marker) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


@needs_planetoid
@pytest.mark.parametrize("recorded", [True, False], ids=["recorded checksum", "no recorded checksum"])
def test_a_tampered_pickle_is_refused_before_it_runs(recorded, tmp_path, monkeypatch):
    """Attack: replace ``ind.cora.x`` with a pickle that runs code. Defence: its checksum (or,
    for a file with none recorded, an unpickler that builds only Planetoid's types) refuses it
    before PyG unpickles it. Switched off, PyG's loader runs the payload."""
    data = tmp_path / "data"
    shutil.copytree(DATA_DIR / "planetoid" / "Cora", data / "planetoid" / "Cora")
    marker = tmp_path / "payload-ran"
    (data / "planetoid" / "Cora" / "raw" / "ind.cora.x").write_bytes(pickle.dumps(_RunsCode(marker), protocol=2))
    if not recorded:
        monkeypatch.delitem(planetoid.SHA256, "Cora/raw/ind.cora.x")

    def attack() -> bool:
        try:
            CitationGraph.load("Cora", data)
        except DataNotFoundError:
            pass  # refused (counts as stopped only if the payload did not run)
        except Exception:  # noqa: BLE001 the payload handed PyG a file object, not a matrix: it ran anyway
            pass
        return marker.exists()

    defence_stops(attack, monkeypatch, planetoid, "_checked", lambda relative, blob: None)


@needs_planetoid
def test_a_genuine_file_without_a_recorded_checksum_loads(monkeypatch):
    """PubMed's allx is not in the shared data and has no recorded digest: a genuine Planetoid
    pickle with no digest passes the restricted unpickler (here: Cora's allx)."""
    monkeypatch.delitem(planetoid.SHA256, "Cora/raw/ind.cora.allx")
    assert CitationGraph.load("Cora", DATA_DIR).x.shape == (2708, 1433)
