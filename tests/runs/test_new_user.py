"""The new user's path (issue 14): usage errors are one line, exit 2, before torch is imported;
child processes import the installed package whatever the working folder; clients wait for a
server that is not up yet and say why they stopped."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from secure_fedgraph.crypto.pki import init_keys
from secure_fedgraph.runs.launch import command, start_server
from tests.helpers import TORCH_PROBE as _PROBE
from tests.helpers import under_open_file_limit


def _busy_port() -> socket.socket:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    return listener


@pytest.mark.parametrize(
    "argv,message",
    [
        (["server", "--bind", "nope", "--plan", "fedavg-gru", "--certs", "{keys}", "--out", "{tmp}/o"], "--bind must be HOST:PORT"),
        (["server", "--bind", "127.0.0.1:{busy}", "--plan", "fedavg-gru", "--clients", "3", "--certs", "{keys}", "--out", "{tmp}/o"],
         "cannot listen there"),
        (["server", "--bind", "127.0.0.1:0", "--plan", "fedavg-gru", "--certs", "{tmp}/none", "--out", "{tmp}/o"], "--certs: missing"),
        (["server", "--bind", "127.0.0.1:0", "--plan", "nope", "--certs", "{keys}", "--out", "{tmp}/o"], "unknown plan 'nope'"),
        (["server", "--bind", "127.0.0.1:0", "--plan", "fedstgd", "--dataset", "nycbike1", "--set", "steps_in=20", "--set", "steps_out=5",
          "--clients", "3", "--certs", "{keys}", "--out", "{tmp}/o"],
         "--set steps_in=20 --set steps_out=5: a window of 20 + 5 steps does not fit in a day of nycbike1 (24 steps"),
        (["client", "--server", "localhost", "--ids", "0", "--certs", "{keys}"], "--server must be HOST:PORT"),
        (["client", "--server", "127.0.0.1:1", "--ids", "0-5", "--certs", "{keys}"], "/clients/client-3."),
        (["client", "--server", "127.0.0.1:1", "--ids", "x", "--certs", "{keys}"], "--ids must look like"),
        (["client", "--server", "127.0.0.1:1", "--ids", "0", "--certs", "{keys}", "--crash-at", "unmasked@1"],
         "--crash-at must be STAGE[@ROUND][:N] with STAGE one of advertise,"),
        (["client", "--server", "127.0.0.1:1", "--ids", "0", "--certs", "{keys}", "--crash-at", "unmask@first"],
         "--crash-at 'unmask@first': ROUND must be a round number from 0"),
        (["demo", "--data-dir", "{tmp}"], "metr-la: missing file"),
        (["run", "fedstgd", "--out", "{tmp}/o", "--data-dir", "{tmp}"], "hzmetro: missing file"),
        (["run", "cnfgnn", "--out", "{tmp}/file/o"], "--out {tmp}/file/o: cannot write there"),
        (["run", "cnfgnn", "--out", "{tmp}/o", "--bogus"], "unrecognized arguments: --bogus"),
        (["run", "cnfgnn", "--out", "{tmp}/o", "--rounds", "x"], "secure-fedgraph run: error: argument --rounds: expected an integer, got 'x'"),
        (["server", "--plan", "fedavg-gru"], "the following arguments are required: --bind, --certs (see `secure-fedgraph server --help`)"),
        (["sweep", "fedrel", "--sigmas", "1", "--out", "{tmp}/o"], "plan fedrel has no privacy option to sweep"),
        (["sweep", "fedstgd", "--epsilons", "4", "--out", "{tmp}/o"], "plan fedstgd cannot calibrate ddp_noise to a target epsilon"),
        (["sweep", "cnfgnn", "--sigmas", "1,0", "--out", "{tmp}/o"], "--sigmas: value must be a finite number > 0, got 0.0"),
        (["sweep", "cnfgnn", "--sigmas", "1", "--seeds", "0,0", "--out", "{tmp}/o"], "--seeds must be distinct"),
        (["sweep", "fedavg-gru", "--epsilons", "4", "--out", "{tmp}/o"], "plan fedavg-gru cannot calibrate ddp_noise to a target epsilon"),
        (["sweep", "cnfgnn", "--epsilons", "4,4", "--out", "{tmp}/o"], "--epsilons must be distinct"),
        (["sweep", "fedavg-gru", "--sigmas", "1", "--attacks", "--out", "{tmp}/o"], "--attacks: the audit has no leakage attack on plan fedavg-gru"),
        (["sweep", "cnfgnn", "--epsilons", "4", "--sigmas", "1", "--out", "{tmp}/o"], "not allowed with argument"),
        (["sweep", "cnfgnn", "--sigmas", "1", "--out", "{tmp}/file/o"], "--out {tmp}/file/o: cannot write there"),
    ],
)
def test_a_usage_error_is_one_line_and_exit_2_before_torch_is_imported(argv, message, keys, tmp_path):
    """Before the heavy imports means within a second (torch alone takes more); the timing
    itself is not asserted, the import is."""
    (tmp_path / "file").write_text("a file, not a folder")
    with _busy_port() as busy:
        values = {"keys": keys, "tmp": tmp_path, "busy": busy.getsockname()[1]}
        args = [a.format(**values) for a in argv]
        done = subprocess.run([sys.executable, "-P", "-c", _PROBE, *args], capture_output=True, text=True, timeout=60,
                              env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 2, done.stderr
    assert message.format(**values) in done.stderr
    assert done.stdout.strip() == "torch not imported"
    assert len([line for line in done.stderr.splitlines() if line.strip()]) == 1, done.stderr  # no usage block above it


@pytest.mark.parametrize(
    "argv,message",
    [
        (["server", "--bind", "127.0.0.1:0", "--plan", "fedavg-vector", "--clients", "1000", "--certs", "{tmp}", "--out", "{tmp}/o"],
         "a server for 1000 clients needs about 1072 open files"),
        # a client process holds one stream per host certificate now, not one per client: its keys are checked first
    ],
)
def test_too_low_a_hard_limit_on_open_files_is_one_line_before_torch_is_imported(argv, message, tmp_path):
    """One connection per client: 1,000 of them cannot fit under a hard limit of 256, which
    only an administrator can raise; the process says so at once instead of failing inside gRPC."""
    args = [a.format(tmp=tmp_path) for a in argv]
    done = subprocess.run(under_open_file_limit([sys.executable, "-P", "-c", _PROBE, *args], 256, 256), capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "at most 256 (the hard limit, `ulimit -Hn`)" in done.stderr
    assert done.stdout.strip() == "torch not imported"
    assert len([line for line in done.stderr.splitlines() if line.strip()]) == 1, done.stderr


def test_child_processes_import_the_installed_package_from_any_folder(tmp_path):
    """A folder holding a ``secure_fedgraph/`` without the server subpackage (a checkout after
    `pip install .`) must not shadow the installed package in the processes we start: the
    launcher's and the sweep's (which once ran ``python -m`` without ``-P``)."""
    (tmp_path / "secure_fedgraph").mkdir()
    (tmp_path / "secure_fedgraph" / "__init__.py").write_text("")
    probe = ["-c", "import secure_fedgraph.server.runtime"]
    shadowed = subprocess.run([sys.executable, *probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert shadowed.returncode != 0 and str(tmp_path / "secure_fedgraph") in shadowed.stderr  # the shadow wins without -P
    launched = subprocess.run([*command("--version")], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert launched.returncode == 0 and "secure-fedgraph" in launched.stdout, launched.stderr
    runtime = subprocess.run([command()[0], "-P", *probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert runtime.returncode == 0, runtime.stderr
    from secure_fedgraph.runs.sweep import _cli

    swept = subprocess.run(_cli("--version"), cwd=tmp_path, capture_output=True, text=True, timeout=120)  # a sweep's points too
    assert swept.returncode == 0 and "secure-fedgraph" in swept.stdout, swept.stderr


def test_clients_started_before_the_server_wait_for_it(tmp_path):
    """docs/running.md's commands run together: clients that find no server yet retry until it
    listens, say once that they are waiting, and the run completes."""
    keys = init_keys(tmp_path / "keys", clients=3).root
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = subprocess.Popen(command("client", "--server", f"127.0.0.1:{port}", "--ids", "0-2", "--certs", str(keys), "--connect-timeout", "60"),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        first = client.stdout.readline()
        assert "waiting for the server" in first
        server = subprocess.Popen(command("server", "--bind", f"127.0.0.1:{port}", "--plan", "fedavg-vector", "--clients", "3", "--certs", str(keys),
                                          "--out", str(tmp_path / "run"), "--set", "rounds=1", "--set", "length=10"),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        output, _ = server.communicate(timeout=120)
        assert server.returncode == 0, output
        rest, _ = client.communicate(timeout=60)
        assert client.returncode == 0, first + rest
        assert "3 of 3 finished the run" in rest and "waiting" not in rest  # said once per process, not per client
    finally:
        client.kill()


def test_clients_give_up_after_the_connect_timeout_and_say_why(tmp_path):
    keys = init_keys(tmp_path / "keys", clients=2).root
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = subprocess.run(command("client", "--server", f"127.0.0.1:{port}", "--ids", "0-1", "--certs", str(keys), "--connect-timeout", "1"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "clients 0-1: UNAVAILABLE" in done.stderr and "waited 1 s for the server; --connect-timeout" in done.stderr
    assert done.stderr.count("UNAVAILABLE") == 1  # one line for both clients
    assert "0 of 2 finished the run" in done.stdout


def test_a_launched_server_reports_its_port(tmp_path):
    keys = init_keys(tmp_path / "keys", clients=3).root
    run = start_server(tmp_path, "--plan", "fedavg-vector", "--clients", "3", "--set", "rounds=1", "--set", "length=10", certs=keys)
    try:
        run.client("0-2")
        output = run.wait(timeout=120)
        assert f"listening on 127.0.0.1:{run.port}" in output and (run.out / "metrics.json").exists()
    finally:
        run.stop()
