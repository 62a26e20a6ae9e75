"""The command line: the demo passes its own checks, and bad options fail clearly."""

from __future__ import annotations

import subprocess
import sys

import pytest

from secure_fedgraph.cli import main
from tests.helpers import HZMETRO_DIR, needs_hzmetro


@pytest.mark.parametrize("backend", ["mask", "ckks", "plain"])
def test_demo_passes_its_checks(backend, capsys):
    assert main(["sum-demo", "--backend", backend, "--clients", "5", "--size", "1000"]) == 0
    out = capsys.readouterr().out
    assert "[FAIL]" not in out and out.count("[PASS]") >= 2
    assert "contributors: 4 of 5 clients" in out  # client 2 dropped and the sum went on


def test_demo_shows_recovery_and_uniform_uploads(capsys):
    main(["sum-demo", "--clients", "6", "--size", "2000"])
    out = capsys.readouterr().out
    assert "recovered for dropped client 2: its mask key from Shamir shares" in out
    assert "Z_2^32" in out


def test_console_script_runs_as_a_module():
    done = subprocess.run([sys.executable, "-m", "secure_fedgraph", "sum-demo", "--clients", "3", "--no-drop"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "contributors: 3 of 3 clients" in done.stdout


@pytest.mark.parametrize(
    "argv,message",
    [
        (["sum-demo", "--clients", "1"], "argument --clients: value must be an int >= 2, got 1"),
        (["sum-demo", "--size", "15"], "argument --size: value must be a positive multiple of 10, got 15"),
        (["sum-demo", "--size", "ten"], "argument --size: expected an integer, got 'ten'"),
        (["client", "--server", "h:1", "--ids", "0", "--certs", ".", "--reconnect-timeout", "-1"], "argument --reconnect-timeout: value must be a finite number >= 0"),
        (["keys", "init", "{tmp}", "--clients", "0"], "argument --clients: value must be an int >= 1, got 0"),
        (["sum-demo", "--drop", "9"], "--drop must be a client id"),
        (["sum-demo", "--backend", "rot13"], "invalid choice"),
        (["run", "nope", "--out", "{tmp}"], "unknown plan 'nope'"),
        (["run", "fedavg-gru", "--dp-sigma", "1", "--out", "{tmp}"], "plan fedavg-gru has no option 'dp_sigma'"),
        (["run", "cnfgnn", "--set", "variant=sl+magic", "--out", "{tmp}"], "variant must be one of"),
        (["run", "fedavg-gru", "--set", "steps_in=1x", "--out", "{tmp}"], "--set 'steps_in=1x': '1x' is not a value"),
        (["run", "cnfgnn", "--target-epsilon", "1e-9", "--out", "{tmp}"], "epsilon 1e-09 at delta 1e-05 cannot be reached"),
        (["run", "cnfgnn", "--target-epsilon", "-1", "--out", "{tmp}"], "argument --target-epsilon: value must be a finite number > 0"),
        (["run", "fedavg-vector", "--target-epsilon", "1", "--out", "{tmp}"], "plan fedavg-vector has no DP noise to calibrate"),
    ],
)
def test_bad_options(argv, message, capsys, tmp_path):
    try:
        status = main([a.format(tmp=tmp_path / "run") for a in argv])
    except SystemExit as exit_info:  # argparse's own checks
        status = exit_info.code
    assert status == 2
    assert message in capsys.readouterr().err


def test_too_many_dropouts_is_a_clear_error(capsys):
    # with one colluder in three, every sum needs all three (two honest inputs): one dropout is too many
    assert main(["sum-demo", "--clients", "3", "--drop", "1"]) == 2
    assert "fewer than the 3 required" in capsys.readouterr().err


def test_a_run_of_two_is_refused_naming_the_corrupt_fraction(capsys):
    # a third of two clients counts one colluder: no sum of two could hold two honest inputs (B2)
    assert main(["sum-demo", "--clients", "2", "--no-drop"]) == 2
    assert "a run of 2 clients cannot put two honest inputs into a sum" in capsys.readouterr().err


def test_run_cnfgnn_in_process_writes_metrics_with_privacy(tmp_path, capsys):
    """`run cnfgnn --backend mask --target-epsilon E --set dp_unit=reading --rounds R --out RUN_DIR` (tiny sizes)."""
    import json

    argv = ["run", "cnfgnn", "--backend", "mask", "--target-epsilon", "6", "--rounds", "2", "--clients", "3", "--out", str(tmp_path / "run"),
            "--set", "hidden_size=8", "--set", "gn_hidden=16", "--set", "gn_update=8", "--set", "max_windows=30", "--set", "dp_unit=reading"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("val rmse") == 2 and "split learning" in out and "epsilon" in out and "calibrates the noise: dp_sigma" in out
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["test_rmse"] > 0 and metrics["test_mae"] > 0 and metrics["backend"] == "mask"
    privacy = metrics["privacy"]
    assert 5.99 <= privacy["epsilon_max"] <= 6 and len(privacy["epsilon_per_client"]) == 3 and privacy["unit"].startswith("one reading")
    assert privacy["accountants"]["prv"]["epsilon_max"] < privacy["epsilon_max"]
    assert metrics["bytes_up_total"] > 0 and len(metrics["round_log"]) == 2


@needs_hzmetro
def test_run_fedstgd_writes_errors_and_cost_and_parses_boolean_options(tmp_path, capsys):
    """`run fedstgd --clients 4 --backend mask --rounds R --out RUN_DIR` (tiny sizes), an
    ablation switched off with `--set gnea=false`, and the centralised run with `--clients 1`."""
    import json

    tiny = ["--set", "hidden=8", "--set", "node_dim=8", "--set", "time_dim=8", "--set", "max_windows=16", "--set", "batch_size=8",
            "--data-dir", str(HZMETRO_DIR)]
    assert main(["run", "fedstgd", "--clients", "4", "--backend", "mask", "--rounds", "1", "--out", str(tmp_path / "run"),
                 "--set", "gnea=false", *tiny]) == 0
    out = capsys.readouterr().out
    assert "val mape" in out and "MAPE" in out and "training" in out
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["config"]["config"]["gnea"] is False and metrics["backend"] == "mask"
    assert metrics["test_rmse"] > 0 and metrics["test_mape"] > 0 and metrics["cost"]["secure_sums_per_batch"] == 32
    assert metrics["bytes_up_by_phase"]["training"] > 0
    assert main(["run", "fedstgd", "--clients", "1", "--set", "adjacency=exact", "--rounds", "1", "--out", str(tmp_path / "central"), *tiny]) == 0
    assert "one party" in capsys.readouterr().out
    central = json.loads((tmp_path / "central" / "metrics.json").read_text())
    assert central["clients"] == 1 and central["test_rmse"] > 0 and central["config"]["config"]["adjacency"] == "exact"


def test_repeatable_options_replace_their_defaults(tmp_path):
    """A repeated option's default is declared once, in the parser: the first use replaces it."""
    from secure_fedgraph.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["keys", "init", "k", "--clients", "1"]).server_name == ["localhost"]
    assert parser.parse_args(["keys", "init", "k", "--clients", "1", "--server-name", "a", "--server-name", "b"]).server_name == ["a", "b"]
    client = ["client", "--server", "h:1", "--ids", "0", "--certs", "."]
    assert parser.parse_args(client).backend == ["mask"]
    assert parser.parse_args([*client, "--backend", "ckks"]).backend == ["ckks"]
    assert parser.parse_args(client).backend == ["mask"]  # the default list was not mutated by the use before
