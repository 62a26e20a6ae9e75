"""The command line: the demo passes its own checks, and bad options fail clearly."""

from __future__ import annotations

import subprocess
import sys

import pytest

from secure_fedgraph.cli import main


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
        (["sum-demo", "--clients", "1"], "--clients must be at least 2"),
        (["sum-demo", "--size", "15"], "--size must be a positive multiple of 10"),
        (["sum-demo", "--drop", "9"], "--drop must be a client id"),
        (["sum-demo", "--backend", "rot13"], "invalid choice"),
    ],
)
def test_bad_options(argv, message, capsys):
    try:
        status = main(argv)
    except SystemExit as exit_info:  # argparse's own checks
        status = exit_info.code
    assert status == 2
    assert message in capsys.readouterr().err


def test_too_many_dropouts_is_a_clear_error(capsys):
    # two clients of three is the minimum: dropping one of three is fine, of two is not
    assert main(["sum-demo", "--clients", "2", "--drop", "1"]) == 2
    assert "fewer than the 2 required" in capsys.readouterr().err
