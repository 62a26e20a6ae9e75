"""`secure-fedgraph data check` and `--dataset` on the command line: one line of what a dataset
holds, or one line naming the file or option that is wrong (exit 2, before torch is imported),
and the traffic plans run by dataset name or folder."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from secure_fedgraph.cli import main
from secure_fedgraph.data.graph_series import write_folder
from secure_fedgraph.data.sources import load_series
from tests.helpers import TORCH_PROBE, needs_hzmetro
from tests.helpers.data import NYCBIKE1_DIR, PEMS_BAY_GRAPH_DIR, SHARED_DATA, needs_nycbike1, needs_pems_bay_graph, pems_bay_with_synthetic_speeds

REPO = Path(__file__).resolve().parents[2]
TINY_FEDSTGD = ["--set", "hidden=8", "--set", "node_dim=8", "--set", "time_dim=8", "--set", "embed_rank=2", "--set", "max_windows=16",
                "--set", "batch_size=8", "--set", "eval_batch_size=16"]
TINY_CNFGNN = ["--set", "hidden_size=8", "--set", "gn_hidden=8", "--set", "gn_update=8", "--set", "max_windows=40", "--set", "max_local_steps=1",
               "--set", "max_server_batches=1"]


def test_data_check_says_in_one_line_what_a_folder_holds(tmp_path, capsys):
    folder = write_folder(load_series("metr-la").first_nodes(4), tmp_path / "mine", edges=True)
    assert main(["data", "check", str(folder)]) == 0
    assert capsys.readouterr().out == ("data check: ok: metr-la: 2016 steps x 4 nodes x 1 channels (speed), every 5 min from 2012-03-01T00:00 "
                                       f"(contiguous, 7 complete days), {np.count_nonzero(load_series('metr-la').adjacency[:4, :4])} edges\n")


@needs_nycbike1
def test_data_check_reads_a_named_dataset_folder(capsys):
    assert main(["data", "check", str(NYCBIKE1_DIR / "nycbike1")]) == 0
    assert "nycbike1: 1369 steps x 128 nodes x 2 channels (inflow, outflow), every 60 min" in capsys.readouterr().out


def _bad_series(tmp_path: Path) -> Path:
    folder = write_folder(load_series("metr-la").first_nodes(3), tmp_path / "bad")
    meta = json.loads((folder / "series.json").read_text())
    (folder / "series.json").write_text(json.dumps({**meta, "step_minutes": 7}))
    return folder


def _nan_series(tmp_path: Path) -> Path:
    week = load_series("metr-la").first_nodes(3)
    folder = tmp_path / "nan"
    write_folder(week, folder)
    signals = week.signals.copy()
    signals[5, 1, 0] = np.nan  # a gap left unfilled: found by the preflight, not mid-run
    np.save(folder / "signals.npy", signals)
    meta = json.loads((folder / "series.json").read_text())
    (folder / "series.json").write_text(json.dumps({**meta, "sha256": {}}))
    return folder


def _short_series(tmp_path: Path) -> Path:
    """30 five-minute steps of 3 sensors: 7 windows of DCRNN's 12 + 12 steps, fewer than a run needs."""
    week = load_series("metr-la").first_nodes(3)
    return write_folder(dataclasses.replace(week, name="short", signals=week.signals[:30]), tmp_path / "short")


@pytest.mark.parametrize(
    "argv,message",
    [
        (["data", "check", "{tmp}/absent"], "data check {tmp}/absent: no such folder"),
        (["data", "check", "{tmp}"], "{tmp}/series.json: missing; a graph-series folder needs series.json, signals.npy"),
        (["data", "check", "{bad}"], "step_minutes must be a whole number of minutes dividing a day (1440), got 7"),
        (["data", "check", "nosuch"], "data check 'nosuch': unknown dataset; known names: metr-la, pems-bay, hzmetro, nycbike1"),
        (["data", "check", "{pems}/pems-bay"], "pems-bay: missing file 'speed.csv'"),
        (["run", "fedstgd", "--dataset", "{tmp}/absent", "--out", "{tmp}/o"], "--dataset {tmp}/absent: no such folder"),
        (["run", "cnfgnn", "--set", "dataset=pems-bay", "--data-dir", "{tmp}", "--out", "{tmp}/o"], "pems-bay: missing file 'sensor_graph/adj_mx_bay.pkl'"),
        (["run", "cnfgnn", "--dataset", "hzmetro", "--clients", "81", "--data-dir", "{shared}", "--out", "{tmp}/o"],
         "--clients 81: dataset hzmetro has 80 nodes"),
        (["run", "fedrel", "--dataset", "nycbike1", "--out", "{tmp}/o"], "--dataset: plan fedrel reads no graph series"),
        (["demo", "--dataset", "nycbike1", "--clients", "200", "--data-dir", "{shared}"], "--clients 200: dataset nycbike1 has 128 sensors"),
        (["sweep", "cnfgnn", "--sigmas", "1", "--dataset", "{bad}", "--out", "{tmp}/o"], "step_minutes"),
        (["run", "cnfgnn", "--dataset", "{nan}", "--out", "{tmp}/o"], "{nan}: metr-la: signals must be finite numbers"),
        (["compare", "--dataset", "{nan}", "--out", "{tmp}/o"], "signals must be finite numbers"),
        (["compare", "--dataset", "hzmetro", "--sensors", "90", "--data-dir", "{shared}", "--out", "{tmp}/o"], "--sensors 90: dataset hzmetro has 80"),
        # windows longer than the data hold: the options and the limit, from the data's sizes
        (["run", "fedstgd", "--set", "steps_in=40", "--set", "steps_out=40", "--data-dir", "{shared}", "--out", "{tmp}/o"],
         "--set steps_in=40 --set steps_out=40: a window of 40 + 40 steps does not fit in a day of hzmetro (73 steps; fedstgd's windows "
         "stay within a day): steps_in + steps_out must be at most 73"),
        (["run", "fedavg-gru", "--set", "steps_in=1000", "--set", "steps_out=1100", "--out", "{tmp}/o"],
         "--set steps_in=1000 --set steps_out=1100: the 2016 steps of metr-la hold 0 windows of 1000 + 1100 steps, and fedavg-gru needs at "
         "least 10: steps_in + steps_out must be at most 2007"),
        (["sweep", "cnfgnn", "--sigmas", "1", "--dataset", "hzmetro", "--set", "steps_in=70", "--data-dir", "{shared}", "--out", "{tmp}/o"],
         "--set steps_in=70: the 511 steps of hzmetro (73 a day, no window across days) hold 0 windows of 70 + 12 steps, and cnfgnn needs "
         "at least 10: steps_in + steps_out must be at most 72"),
        (["demo", "--dataset", "{short}"], "--dataset {short} (steps_in 12 and steps_out 12 by default): the 30 steps of {short} hold 7 windows "
         "of 12 + 12 steps, and fedavg-gru needs at least 10: steps_in + steps_out must be at most 21"),
    ],
)
def test_a_data_mistake_is_one_line_and_exit_2_before_torch_is_imported(argv, message, tmp_path):
    """The probe runs this checkout's package (the repository folder first on the path)."""
    if any("{pems}" in a or "{shared}" in a for a in argv) and (PEMS_BAY_GRAPH_DIR is None or not (SHARED_DATA / "nycbike1").is_dir()):
        pytest.skip("needs ../shared/data's pems-bay graph and nycbike1")
    values = {"tmp": tmp_path, "bad": _bad_series(tmp_path), "nan": _nan_series(tmp_path), "shared": SHARED_DATA, "pems": tmp_path / "p",
              "short": _short_series(tmp_path)}
    if any("{pems}" in a for a in argv):
        pems_bay_with_synthetic_speeds(tmp_path / "p")
        (tmp_path / "p" / "pems-bay" / "speed.csv").unlink()
    args = [a.format(**values) for a in argv]
    done = subprocess.run([sys.executable, "-c", TORCH_PROBE, *args], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 2, done.stderr
    assert message.format(**values) in done.stderr
    assert done.stdout.strip() == "torch not imported"
    assert len([line for line in done.stderr.splitlines() if line.strip()]) == 1, done.stderr


@needs_nycbike1
@needs_hzmetro
def test_run_fedstgd_by_dataset_name(tmp_path, capsys):
    """`run fedstgd --dataset nycbike1 --data-dir DIR --clients 3 --rounds 1` (tiny sizes)."""
    assert main(["run", "fedstgd", "--dataset", "nycbike1", "--data-dir", str(NYCBIKE1_DIR), "--clients", "3", "--rounds", "1",
                 "--out", str(tmp_path / "run"), "--quiet", *TINY_FEDSTGD]) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["config"]["config"]["dataset"] == "nycbike1" and np.isfinite(metrics["test_rmse"])
    assert "test RMSE" in capsys.readouterr().out


@needs_pems_bay_graph
def test_run_cnfgnn_on_a_pems_bay_folder(tmp_path, capsys):
    """`run cnfgnn --dataset PATH/pems-bay --clients 3` on PEMS-BAY's real graph with SYNTHETIC speeds."""
    root = pems_bay_with_synthetic_speeds(tmp_path / "data")
    assert main(["run", "cnfgnn", "--dataset", str(root / "pems-bay"), "--clients", "3", "--rounds", "1", "--backend", "plain",
                 "--out", str(tmp_path / "run"), "--quiet", *TINY_CNFGNN]) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["config"]["config"]["dataset"] == str(root / "pems-bay") and 0 < metrics["test_rmse"] < 60


def test_plans_with_their_own_dataset_option_keep_it(tmp_path, capsys):
    """fedrel's and nfedgnn's `--set dataset=...` name a UEA archive or a Planetoid graph, not a
    graph series: the preflight leaves it to them (only `--dataset` is refused there)."""
    from types import SimpleNamespace

    from secure_fedgraph.cli.plans import check_plan_data

    check_plan_data(SimpleNamespace(plan="fedrel", set=["dataset=BasicMotions"], dataset=None, data_dir=None, clients=None))
    with pytest.raises(Exception, match="--dataset: plan fedrel reads no graph series"):
        check_plan_data(SimpleNamespace(plan="fedrel", set=[], dataset="nycbike1", data_dir=None, clients=None))
