"""The Table 7 harness: every method gets the same budget, and a row is exactly what a direct
run of that method with that budget gives."""

from __future__ import annotations

import json

import pytest

from secure_fedgraph.cli import main
from secure_fedgraph.runs.comparison import METHODS, Budget, centralised_config, compare, plan_for
from secure_fedgraph.errors import ConfigError
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig
from secure_fedgraph.runs.simulate import simulate
from secure_fedgraph.training.centralised import train_centralised_gru_gn

BUDGET = Budget(epochs=1, sensors=4, max_windows=30)


def test_rows_are_the_methods_own_runs_with_one_budget():
    rows = {r.method: r for r in compare(("cnfgnn", "local-gru", "gru+gn-centralised"), BUDGET, device="cpu")}
    cnfgnn = simulate(plan_for("cnfgnn", BUDGET), SecureSumConfig(backend=Backend.MASK)).metrics
    assert (rows["cnfgnn"].test_rmse, rows["cnfgnn"].test_mae) == (cnfgnn["test_rmse"], cnfgnn["test_mae"])
    assert len(rows["cnfgnn"].details["rounds"]) == len(rows["local-gru"].details["rounds"]) == 1
    central = train_centralised_gru_gn(centralised_config(BUDGET))
    assert (rows["gru+gn-centralised"].test_rmse, rows["gru+gn-centralised"].test_mae) == (central.test_rmse, central.test_mae)
    assert rows["gru+gn-centralised"].details["epochs"] == 1 and rows["gru+gn-centralised"].details["sensors"] == 4
    assert {r.paper_rmse for r in rows.values()} == {METHODS[m].paper_rmse for m in rows}


def test_bad_methods_and_budgets_fail_before_anything_trains():
    with pytest.raises(ConfigError, match="unknown methods"):
        compare(("cnfgnn", "gcn"), BUDGET)
    with pytest.raises(ConfigError, match="rounds must be"):
        compare(("cnfgnn",), Budget(epochs=0))
    with pytest.raises(ConfigError, match="sensors must be"):
        compare(("gru-centralised",), Budget(sensors=1))


def test_the_compare_command_writes_the_table(tmp_path, capsys):
    assert main(["compare", "--methods", "fedavg-gru,local-gru", "--epochs", "1", "--sensors", "3", "--max-windows", "20",
                 "--backend", "plain", "--out", str(tmp_path)]) == 0
    table = (tmp_path / "comparison.md").read_text()
    saved = json.loads((tmp_path / "comparison.json").read_text())
    assert [r["method"] for r in saved["rows"]] == ["fedavg-gru", "local-gru"] and (saved["epochs"], saved["sensors"], saved["max_windows"]) == (1, 3, 20)
    assert "the first 3 sensors, at most 20 windows per split" in table
    for row in saved["rows"]:
        assert f"| {row['label']} | {row['test_rmse']:.3f} |" in table
    assert "GRU (63K) + FedAvg" in capsys.readouterr().out
