"""What a process hosting many connections needs from the OS (issue 14, item 6): one open file
per client connection, so the soft limit is raised to the hard one at start, or the process
stops with one line; and the counts a run reports."""

from __future__ import annotations

import json
import resource
import subprocess
import time

import pytest

from secure_fedgraph.crypto.pki import init_keys
from secure_fedgraph.errors import ConfigError
from secure_fedgraph.runs.launch import command
from secure_fedgraph.resources import RESERVED_FILES, ensure_client_files, ensure_open_files, usage
from tests.helpers import under_open_file_limit


@pytest.fixture
def soft_limit():
    """Restores this process's soft limit after a test lowers it (the hard one is never touched here)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    yield soft, hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_soft_limit_below_the_need_is_raised_to_the_hard_one(soft_limit):
    _, hard = soft_limit
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip(f"this machine's hard limit on open files is {hard}; the test needs room above 1,024")
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    assert ensure_client_files(250) == 1024  # 250 + 64 fit: nothing changes
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == 1024
    target = hard if hard != resource.RLIM_INFINITY else 1000 + RESERVED_FILES
    assert ensure_client_files(1000) == target  # 1,000 connections do not fit in 1,024
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (target, hard)


def test_a_hard_limit_below_the_need_is_a_clear_error(soft_limit):
    _, hard = soft_limit
    needed = (hard if hard != resource.RLIM_INFINITY else 2**20) + 1
    with pytest.raises(ConfigError, match=r"a server for \d+ clients needs about \d+ open files .* `ulimit -Hn`"):
        ensure_open_files(needed, what=f"a server for {needed} clients")
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == soft_limit  # nothing changed


def test_usage_counts_this_process_open_files(tmp_path):
    before = usage()
    with open(tmp_path / "a", "w"), open(tmp_path / "b", "w"):
        during = usage()
    assert during.open_files == before.open_files + 2
    assert usage().open_files == before.open_files
    assert before.threads >= 1 and before.peak_rss_bytes >= before.rss_bytes > 0


def test_processes_started_with_a_low_soft_limit_host_more_clients_than_it(tmp_path):
    """48 clients in one process against a server (each under its own certificate: no host
    certificate), each process started with a soft limit of 40 open files: without the raise neither could hold a connection per client (gRPC's accept
    and connect fail with EMFILE). The server's own counts show a connection per client while
    the run was on, and none left after it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 48 + RESERVED_FILES + 8:
        pytest.skip(f"this machine's hard limit on open files is {hard}")
    n = 48
    keys = init_keys(tmp_path / "keys", clients=n).root
    port_file = tmp_path / "server.port"
    server = subprocess.Popen(under_open_file_limit(command("server", "--bind", "127.0.0.1:0", "--port-file", str(port_file), "--plan", "fedavg-vector", "--clients", str(n),
                                      "--set", "rounds=1", "--set", "length=8", "--backend", "plain", "--certs", str(keys), "--out", str(tmp_path / "run"),
                                      "--join-timeout", "60"), 40),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    client = None
    try:
        for _ in range(600):
            if port_file.exists() and port_file.read_text().strip():
                break
            assert server.poll() is None, server.communicate()[0]
            time.sleep(0.1)
        client = subprocess.Popen(under_open_file_limit(command("client", "--server", f"127.0.0.1:{port_file.read_text().strip()}", "--ids", f"0-{n - 1}", "--certs", str(keys),
                                          "--backend", "plain"), 40),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        said, _ = client.communicate(timeout=180)
        output, _ = server.communicate(timeout=60)
    finally:
        for process in (client, server):
            if process is not None and process.poll() is None:
                process.kill()
    assert server.returncode == 0, output
    assert client.returncode == 0 and f"{n} of {n} finished the run" in said, said
    assert f"clients 0-{n - 1}: {n} streams; open files" in said and "before connecting" in said  # no host certificate: one stream each
    process = json.loads((tmp_path / "run" / "metrics.json").read_text())["process"]
    assert process["joined"]["open_files"] >= process["listening"]["open_files"] + n  # a connection per client, above the 40
    assert process["after"]["open_files"] <= process["listening"]["open_files"]  # every connection closed
