"""nFedGNN's results table (runs/nfedgnn_report.py): one row per dataset, model and method, the
mean and spread over seeds, Table 1's count beside the paper's."""

from __future__ import annotations

import json

from secure_fedgraph.runs.nfedgnn_report import main


def _write(root, name, **metrics):
    folder = root / "Cora" / name
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(metrics))


def test_the_table_has_a_row_per_method_with_mean_and_spread(tmp_path, capsys):
    for seed, acc in enumerate((0.70, 0.74)):
        _write(tmp_path, f"gcn-nfedgnn-lap-s{seed}", test_acc=acc, best_val_test_acc=acc + 0.01, laplacian=0.001, paper_table1_mib=33.06)
    _write(tmp_path, "gcn-centralised-s0", test_acc=0.81, best_val_test_acc=0.8)
    _write(tmp_path, "gcn-unknown-s0", test_acc=0.1, best_val_test_acc=0.1)  # not a run.sh name: left out
    assert main([str(tmp_path)]) == 0
    rows = (tmp_path / "table.md").read_text().splitlines()[2:]
    assert len(rows) == 2
    assert rows[0].startswith("| Cora | GCN | centralised") and "| 81.0 | 80.0 | 1 |" in rows[0]
    assert "| 0.001 | 72.0 ± 2.8 | 73.0 ± 2.8 | 2 | 33.06 | 34.06 |" in rows[1]
    assert main([str(tmp_path / "none")]) == 2 and "no run" in capsys.readouterr().err
