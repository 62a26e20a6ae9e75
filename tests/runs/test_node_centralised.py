"""nFedGNN's centralised reference (runs/node_centralised.py): the whole PyG GCN trained on Cora
learns, writes its run folder, and a missing dataset is one line with exit 2."""

from __future__ import annotations

import json

from secure_fedgraph.runs.node_centralised import main
from tests.helpers import PLANETOID_DIR, needs_planetoid


@needs_planetoid
def test_the_centralised_gcn_learns_cora_and_writes_its_metrics(tmp_path, capsys):
    assert main(["--dataset", "Cora", "--epochs", "30", "--data-dir", str(PLANETOID_DIR), "--out", str(tmp_path)]) == 0
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["plan"] == "gcn-centralised" and len(metrics["rounds"]) == 30
    assert metrics["rounds"][-1]["train_loss"] < metrics["rounds"][0]["train_loss"]
    assert metrics["test_acc"] > 0.7  # Kipf and Welling's GCN reaches about 0.8 in 200 epochs; chance is 0.14
    assert "test accuracy" in capsys.readouterr().out


def test_a_missing_dataset_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["--dataset", "CiteSeer", "--data-dir", str(tmp_path), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("node_centralised:") and "\n" not in err and "citeseer" in err.lower()
