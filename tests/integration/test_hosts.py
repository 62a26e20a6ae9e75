"""A run across hosts with their own addresses (issue 33, item 3; docs/deploy.md).

The server and three client hosts each live in a network namespace of their own, with their own
address on one bridge (secure_fedgraph/runs/netns.py): server 10.77.0.1, hosts a, b, c at .2,
.3, .4, hosting clients 0-1, 2-4 and 5-6. The keys are made once, as on an operator's machine
that never runs the protocol, with a server certificate naming the server by its address only
(no DNS name, so no ``localhost``), and each host gets only the files docs/deploy.md lists for
it (no ``ca.key`` anywhere but the operator's folder). The clients dial the server's address and
check its certificate under that address (``--server-name 10.77.0.1``).

Each plan runs two rounds with the mask backend over real gRPC between the namespaces. Once
round 0 is over (the server's round line), host c's link is taken down at the switch: its two
clients' packets are lost from then on, and nothing tells the server. The server must drop
them in round 1 once keepalive fails their stream (within about 30 s: protocol/transports/
grpc_service.py), long before the step deadline (``--step-timeout``, 120 s), and finish the run
over hosts a and b, whose processes exit 0. Host c's process either still waits at the end (its
stream failed, ``UNAVAILABLE: Stream removed (recvmsg:No route to host (113))``, and it retries
for ``--reconnect-timeout``) or has given up, without finishing (exit 1). A third test takes host
c's link down for a few seconds only: nothing is lost, and every client finishes. Seven clients,
as in test_faults.py: against the default third of colluders the threshold is 5, so the five
survivors can rebuild what the two lost clients' masks need, at whatever stage of round 1 the
cut lands.

Skipped, with the reason, where network namespaces cannot be made (not root, no ``ip``, or
``ip netns add`` refused).
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import time
from pathlib import Path

import pytest
from cryptography import x509

from secure_fedgraph.clients.ids import parse_ids
from secure_fedgraph.crypto.pki import KeyDirectory, init_keys
from secure_fedgraph.runs import netns
from secure_fedgraph.runs.launch import LocalRun, start_server
from tests.helpers import HZMETRO_DIR, needs_hzmetro

HOSTS = {"a": "0-1", "b": "2-4", "c": "5-6"}  # client host -> the ids it runs
CUT, SURVIVORS = "c", (0, 1, 2, 3, 4)
CLIENTS = 7
STEP_TIMEOUT_S = 120  # the server's default wait for a step's answers: far more than the keepalive needs to find a dead link
KEEPALIVE_BOUND_S = 45  # keepalive fails a dead link's stream within about 30 s (10 s between pings, 20 s without an answer)
BLIP_S = 6  # a link down this long costs nothing: well within the keepalive's 20 s without an answer


@pytest.fixture
def hosts():
    """The server and hosts a, b, c, each in its own namespace; removed after the test."""
    reason = netns.unavailable()
    if reason is not None:
        pytest.skip(reason)
    with netns.network(["server", *HOSTS]) as net:
        yield net


def _kits(keys: KeyDirectory, work: Path) -> dict[str, Path]:
    """Each host's folder holding exactly the files docs/deploy.md hands it: the server gets the
    CA certificate, its own certificate and key, and every client's certificate (relayed in the
    Welcome); a client host the CA certificate, its host certificate and key, and its clients'
    identity keys. ``ca.key`` goes nowhere."""
    wanted = {"server": [keys.ca, keys.server_cert, keys.server_key, *(keys.client_cert(c) for c in range(CLIENTS))]}
    for host, ids in HOSTS.items():
        wanted[host] = [keys.ca, keys.host_cert(ids), keys.host_key(ids), *(keys.identity_key(c) for c in parse_ids(ids))]
    kits = {}
    for host, files in wanted.items():
        kits[host] = work / f"kit-{host}"
        for path in files:
            target = kits[host] / path.relative_to(keys.root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)  # keeps mode 0600 on the private keys
    return kits


def _provision(work: Path, server_ip: str) -> dict[str, Path]:
    keys = init_keys(work / "operator-keys", clients=CLIENTS, server_names=(), server_ips=(server_ip,),
                     hosts={ids: parse_ids(ids) for ids in HOSTS.values()})
    san = x509.load_pem_x509_certificate(keys.server_cert.read_bytes()).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address(server_ip)] and not san.get_values_for_type(x509.DNSName)
    return _kits(keys, work)


def _wait_for(path: Path, text: str, run: LocalRun, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in path.read_text():
        assert run.server.poll() is None, f"the server exited before printing {text!r}:\n{path.read_text()}"
        assert time.monotonic() < deadline, f"no {text!r} from the server within {timeout_s:g} s:\n{path.read_text()}"
        time.sleep(0.1)


def _run_with_a_host_cut(work: Path, net: netns.Network, *, plan: str, options: dict, client_args: tuple[str, ...] = (),
                         wrong_name: bool = False) -> dict:
    """Run ``plan`` (2 rounds, mask) across the hosts, cut host c once round 0 is over, and check
    that the run finished over hosts a and b with c's clients dropped in round 1. With
    ``wrong_name``, host a first also starts a process that expects the server under the name
    ``localhost``, which the certificate does not carry: it must stop at once (exit 2) with the
    line naming --server-name and the address the certificate carries. Returns the metrics."""
    server = net["server"]
    kits = _provision(work, server.address)
    log = work / "server.log"
    sets = [arg for key, value in options.items() for arg in ("--set", f"{key}={value}")]
    with open(log, "w") as out:
        run = start_server(work, "--plan", plan, "--clients", str(CLIENTS), "--backend", "mask", "--join-timeout", "90",
                           "--step-timeout", str(STEP_TIMEOUT_S), "--set", "rounds=2", *sets,
                           certs=kits["server"], stdout=out, env={"PYTHONUNBUFFERED": "1"}, host=server.address, prefix=server.prefix)
    try:
        impostor = run.client(HOSTS["a"], "--server-name", "localhost", "--connect-timeout", "2", certs=kits["a"], prefix=net["a"].prefix) \
            if wrong_name else None
        processes = {host: run.client(ids, "--server-name", server.address, *client_args, certs=kits[host], prefix=net[host].prefix)
                     for host, ids in HOSTS.items()}
        _wait_for(log, "round 0:", run, timeout_s=120)
        net.cut(CUT)  # round 1 has begun: host c's cable is pulled
        run.wait(timeout=240)
        said = log.read_text()
        for host in HOSTS.keys() - {CUT}:
            assert processes[host].wait(timeout=30) == 0, processes[host].communicate()[0]
        cut = processes[CUT]
        if cut.poll() is not None:  # cut off, it never heard the end: it is still waiting, or gave up on its own
            output = cut.communicate()[0]
            assert cut.returncode != 0 and f"0 of {len(parse_ids(HOSTS[CUT]))} finished the run" in output, output
        if impostor is not None:
            output = impostor.communicate(timeout=30)[0]
            assert impostor.returncode == 2, output  # at once, not after retrying: the name is a mistake to fix
            assert (f"secure-fedgraph: error: --server-name localhost: the certificate of the server at {run.address} names "
                    f"{server.address}, not localhost; pass that as --server-name") in output, output
    finally:
        run.stop(grace_s=1.0)
    metrics = json.loads((run.out / "metrics.json").read_text())
    victims = parse_ids(HOSTS[CUT])
    assert sorted(metrics["dropped"]) == [str(v) for v in victims], metrics["dropped"]
    events = "\n".join(metrics["events"])
    for victim in victims:
        assert metrics["dropped"][str(victim)].endswith("in round 1")
        assert f"server: client {victim} dropped: " in said  # the server's log names each dropped client ...
        assert f"client {victim} left at " in events  # ... and the step that lost it, when keepalive failed the stream
    assert metrics["clients_finished"] == len(SURVIVORS)
    assert [r["round"] for r in metrics["rounds"]] == [0, 1]
    assert metrics["round_log"][1]["seconds"] < KEEPALIVE_BOUND_S, metrics["round_log"][1]  # not the step timeout
    return metrics


def test_masked_fedavg_across_hosts_survives_a_host_cut_off(hosts, tmp_path):
    """fedavg-gru (secure FedAvg of per-sensor GRUs, mask) across four namespaces; host c is cut
    off in round 1. Round 0 averaged all seven clients' models, round 1 at least the survivors'.
    A client that expects the server under another name than its address stops at once, naming
    --server-name and the address the certificate carries."""
    metrics = _run_with_a_host_cut(tmp_path, hosts, plan="fedavg-gru", wrong_name=True,
                                   options=dict(hidden_size=8, max_windows=40, max_local_steps=2, batch_size=16))
    assert metrics["rounds"][0]["clients"] == CLIENTS and metrics["rounds"][1]["clients"] >= len(SURVIVORS)
    assert all(value == value for value in (metrics["test_rmse"], metrics["test_mae"]))  # finite numbers, not NaN


def test_a_host_whose_link_is_down_for_seconds_stays_in_the_run(hosts, tmp_path):
    """Host c's link goes down as round 1 begins and comes back BLIP_S later, less than the
    keepalive's 20 s without an answer (protocol/transports/grpc_service.py): no stream fails,
    TCP resends what was lost, and the run finishes with all seven clients, none dropped, every
    host exiting 0 (docs/deploy.md, "Ports and flags")."""
    server = hosts["server"]
    kits = _provision(tmp_path, server.address)
    log = tmp_path / "server.log"
    sets = [arg for key, value in dict(hidden_size=8, max_windows=40, max_local_steps=2, batch_size=16).items() for arg in ("--set", f"{key}={value}")]
    with open(log, "w") as out:
        run = start_server(tmp_path, "--plan", "fedavg-gru", "--clients", str(CLIENTS), "--backend", "mask", "--join-timeout", "90",
                           "--step-timeout", "90", "--set", "rounds=2", *sets, certs=kits["server"], stdout=out, env={"PYTHONUNBUFFERED": "1"},
                           host=server.address, prefix=server.prefix)
    try:
        processes = {host: run.client(ids, "--server-name", server.address, certs=kits[host], prefix=hosts[host].prefix)
                     for host, ids in HOSTS.items()}
        _wait_for(log, "round 0:", run, timeout_s=120)
        hosts.cut(CUT)
        time.sleep(BLIP_S)
        hosts.restore(CUT)
        run.wait(timeout=180)
        for host, process in processes.items():
            assert process.wait(timeout=60) == 0, (host, process.communicate()[0])
    finally:
        run.stop(grace_s=1.0)
    metrics = json.loads((run.out / "metrics.json").read_text())
    assert metrics["dropped"] == {} and metrics["clients_finished"] == CLIENTS, (metrics["dropped"], log.read_text())
    assert [r["clients"] for r in metrics["rounds"]] == [CLIENTS, CLIENTS]


@needs_hzmetro
def test_fedstgd_across_hosts_survives_a_host_cut_off(hosts, tmp_path):
    """FedSTGD (HZMetro, its P/Q sums and FedAvg through mask) across four namespaces at a small
    size; host c is cut off in round 1, in a streaming P/Q sum, its FedAvg or its evaluation."""
    metrics = _run_with_a_host_cut(tmp_path, hosts, plan="fedstgd", client_args=("--data-dir", str(HZMETRO_DIR)),
                                   options=dict(hidden=8, node_dim=8, time_dim=8, embed_rank=2, max_windows=8, batch_size=8, eval_batch_size=16))
    assert all(value == value for value in (metrics["test_rmse"], metrics["test_mae"]))
