"""The real data sets, where they are found ($SECURE_FEDGRAPH_DATA, else ../shared/data beside
the repository): their folders, the skip marks for tests that need them, and checks on what
their readings become."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

def pooled_normalisation(raws) -> tuple[float, float]:
    """DCRNN's training mean and std over all sensors, from each sensor's moments: the numbers
    the plans' normalisation secure sum gives (reference for centralised recomputations)."""
    moments = np.array([raw.training_moments() for raw in raws], dtype=np.float64)
    mean = float(moments[:, 0].mean())
    return mean, float(np.sqrt(moments[:, 1].mean() - mean**2))


def assert_no_readings(name: str, tensors, speeds) -> None:
    """No tensor in ``tensors`` carries a sensor's speed readings (mph, to 4 decimals): fewer
    than 1% of any sensor's readings above 1 mph appear among its values."""
    for value in tensors.values():
        flat = np.round(np.asarray(value, dtype=np.float64).ravel(), 4)
        for s in speeds:
            s = np.round(np.asarray(s, dtype=np.float64).ravel(), 4)
            assert np.isin(s[s > 1], flat).mean() < 0.01, name


SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"  # ../shared/data beside the repository


def _data_dir_holding(dataset: str, files: tuple[str, ...]) -> Path | None:
    """$SECURE_FEDGRAPH_DATA, else ../shared/data beside the repository, if it holds ``files`` of ``dataset``."""
    for candidate in (os.environ.get("SECURE_FEDGRAPH_DATA"), SHARED_DATA):
        if candidate and all((Path(candidate) / dataset / f).is_file() for f in files):
            return Path(candidate)
    return None


def _hzmetro_dir() -> Path | None:
    from secure_fedgraph.data import HZMetro

    return _data_dir_holding("hzmetro", HZMetro.raw_files)


def _planetoid_dir() -> Path | None:
    from secure_fedgraph.data.planetoid import raw_files

    return _data_dir_holding("planetoid", raw_files("Cora") + raw_files("CiteSeer"))


def _uea_dir() -> Path | None:
    from secure_fedgraph.data.uea import UEA

    found = [_data_dir_holding(shape.folder, shape.raw_files) for shape in UEA.values()]
    return found[0] if None not in found and len(set(found)) == 1 else None


HZMETRO_DIR = _hzmetro_dir()
needs_hzmetro = pytest.mark.skipif(HZMETRO_DIR is None, reason="HZMetro not found under $SECURE_FEDGRAPH_DATA or ../shared/data")
UEA_DIR = _uea_dir()
ISRUC_DIR = _data_dir_holding("isruc_s3", ("DistanceMatrix.npy",))
needs_isruc = pytest.mark.skipif(ISRUC_DIR is None, reason="ISRUC_S3's DistanceMatrix.npy not found under $SECURE_FEDGRAPH_DATA or ../shared/data")
needs_uea = pytest.mark.skipif(UEA_DIR is None, reason="UEA BasicMotions and JapaneseVowels not found under $SECURE_FEDGRAPH_DATA or ../shared/data")
PLANETOID_DIR = _planetoid_dir()
needs_planetoid = pytest.mark.skipif(PLANETOID_DIR is None, reason="Cora and CiteSeer not found under $SECURE_FEDGRAPH_DATA or ../shared/data")


NYCBIKE1_DIR = _data_dir_holding("nycbike1", ("val.npz", "test.npz", "adj_mx.npz"))
needs_nycbike1 = pytest.mark.skipif(NYCBIKE1_DIR is None, reason="NYCBike1 not found under $SECURE_FEDGRAPH_DATA or ../shared/data")
PEMS_BAY_GRAPH_DIR = _data_dir_holding("pems-bay", ("sensor_graph/adj_mx_bay.pkl",))
needs_pems_bay_graph = pytest.mark.skipif(PEMS_BAY_GRAPH_DIR is None,
                                          reason="PEMS-BAY's sensor graph not found under $SECURE_FEDGRAPH_DATA or ../shared/data")


def pems_bay_with_synthetic_speeds(root: Path, *, days: int = 2, seed: int = 0) -> Path:
    """A data directory holding ``pems-bay/`` in its published layout: PEMS-BAY's real sensor
    graph (DCRNN's adj_mx_bay.pkl, copied) and SYNTHETIC speeds in ``speed.csv`` (the shared
    data have no PEMS-BAY readings): per sensor a daily cycle between about 40 and 65 mph plus
    seeded noise, 288 five-minute steps a day, the header the graph's 325 sensor ids in order."""
    import pickle
    import shutil

    folder = root / "pems-bay"
    (folder / "sensor_graph").mkdir(parents=True)
    shutil.copy(PEMS_BAY_GRAPH_DIR / "pems-bay" / "sensor_graph" / "adj_mx_bay.pkl", folder / "sensor_graph" / "adj_mx_bay.pkl")
    with open(folder / "sensor_graph" / "adj_mx_bay.pkl", "rb") as f:
        ids = pickle.load(f, encoding="latin1")[0]
    rng = np.random.default_rng(seed)
    t = np.arange(days * 288)[:, None]
    speed = 52 + 12 * np.cos(2 * np.pi * (t / 288 + rng.random(len(ids)))) + rng.normal(0, 2, (len(t), len(ids)))
    np.savetxt(folder / "speed.csv", speed, delimiter=",", header=",".join(ids), comments="", fmt="%.3f")
    return root
