"""gRPC over real TLS sockets on 127.0.0.1, each piece written once: the mTLS channel a client
(or an attacker speaking the wire format by hand) opens, and the three ways tests start a server:

- :func:`transport_server`: the server's transport alone behind a TLS port (its handler, no plan);
- :func:`start_server`: the real server runtime in a thread of this process, with
  :func:`start_clients` for real client runtimes beside it, so that one defence can be switched
  off inside the code under test;
- :func:`launch_run`: a server process (secure_fedgraph/runs/launch.py, as the demo and the
  benchmarks start theirs), whose clients the test starts; tests/integration/conftest.py's
  ``start_server`` fixture stops them.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from secure_fedgraph.clients.ids import format_ids
from secure_fedgraph.clients.runtime import ClientOptions, ClientOutcome, run_clients
from secure_fedgraph.crypto.pki import KeyDirectory, init_keys
from secure_fedgraph.papers.synthetic import FedAvgVector, FedAvgVectorConfig
from secure_fedgraph.protocol.core.steps import StepProgress
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig
from secure_fedgraph.protocol.transports.grpc_client import ClientStream
from secure_fedgraph.protocol.transports.grpc_server import GrpcServerTransport
from secure_fedgraph.protocol.transports.grpc_service import channel_options
from secure_fedgraph.runs.launch import LocalRun, ensure_host_cert
from secure_fedgraph.runs.launch import start_server as launch_server
from secure_fedgraph.server.runtime import ServerOptions, run_server


def mtls_channel(address: str, keys: KeyDirectory, client: int, *, ca: KeyDirectory | None = None,
                 options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
    """A TLS channel to ``address`` under client ``client``'s certificate and key in ``keys``,
    trusting the CA of ``ca`` (default: ``keys``), with channel ``options`` (the server's name
    is checked as "localhost", the name the test certificates carry)."""
    credentials = grpc.ssl_channel_credentials(root_certificates=(ca or keys).ca.read_bytes(), private_key=keys.client_key(client).read_bytes(),
                                               certificate_chain=keys.client_cert(client).read_bytes())
    return grpc.secure_channel(address, credentials, options=[*options, ("grpc.ssl_target_name_override", "localhost")])


@contextlib.contextmanager
def transport_server(keys: KeyDirectory, *, step_timeout_s: float, hello_timeout_s: float = 10.0,
                     streams: int | None = None) -> Iterator[tuple[GrpcServerTransport, int]]:
    """The server's transport behind a real TLS port on 127.0.0.1 (at most ``streams`` at once,
    as the server runtime allows n + 8): yields (transport, port)."""
    transport = GrpcServerTransport({0, 1}, step_timeout_s=step_timeout_s, hello_timeout_s=hello_timeout_s)
    port = transport.listen("127.0.0.1:0", ca=keys.ca.read_bytes(), cert=keys.server_cert.read_bytes(), key=keys.server_key.read_bytes(),
                            max_streams=streams, workers=4)
    try:
        yield transport, port
    finally:
        transport.stop(grace_s=0.0)


@dataclass
class LiveServer:
    """``run_server`` in a thread; ``wait`` gives its metrics or raises what it raised."""

    keys: KeyDirectory
    out: Path
    port: int = 0
    thread: threading.Thread | None = None
    metrics: dict[str, Any] | None = None
    error: BaseException | None = None
    said: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wait(self, timeout_s: float = 120.0) -> dict[str, Any]:
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), f"the server did not finish within {timeout_s:g} s"
        if self.error is not None:
            raise self.error
        return self.metrics

    def finished(self, timeout_s: float = 120.0) -> bool:
        """Whether the run finished (False if the server raised)."""
        try:
            self.wait(timeout_s)
        except Exception:  # noqa: BLE001 any failure of the run is what the caller asks about
            return False
        return True


def start_server(work: Path, *, clients: int, keys_for: int | None = None, length: int = 64, rounds: int = 1,
                 progress: StepProgress | None = None, **options: Any) -> LiveServer:
    """A fedavg-vector run of ``clients`` clients (mask backend) waiting on a free port;
    ``progress`` hears its steps (protocol/engine/progress.py)."""
    root = work / "keys"
    keys = KeyDirectory(root if root.exists() else init_keys(root, clients=keys_for or clients).root)
    live = LiveServer(keys, work / "run")
    port_file = work / "server.port"
    port_file.unlink(missing_ok=True)
    server_options = ServerOptions(
        bind="127.0.0.1:0", plan=FedAvgVector(FedAvgVectorConfig(clients=clients, length=length, rounds=rounds)),
        secure=SecureSumConfig(backend=Backend.MASK), keys=keys.root, out=live.out, port_file=port_file,
        **{"join_timeout_s": 30.0, "step_timeout_s": 30.0, **options},
    )

    def serve() -> None:
        try:
            live.metrics = run_server(server_options, say=live.said.append, progress=progress)
        except BaseException as exc:  # noqa: BLE001 handed to wait()
            live.error = exc

    live.thread = threading.Thread(target=serve, daemon=True, name="live-server")
    live.thread.start()
    deadline = time.monotonic() + 30
    while not (port_file.exists() and port_file.read_text().strip()):
        assert live.thread.is_alive() and time.monotonic() < deadline, f"the server did not listen: {live.error!r}"
        time.sleep(0.02)
    live.port = int(port_file.read_text())
    return live


@dataclass
class LiveClients:
    """``run_clients`` in a thread."""

    thread: threading.Thread
    outcomes: dict[int, ClientOutcome] = field(default_factory=dict)

    def wait(self, timeout_s: float = 120.0) -> dict[int, ClientOutcome]:
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), f"the clients did not finish within {timeout_s:g} s"
        return self.outcomes

    def all_finished(self, timeout_s: float = 120.0) -> bool:
        return all(o.finished for o in self.wait(timeout_s).values())


def start_clients(server: LiveServer, ids: list[int], **options: Any) -> LiveClients:
    """Honest clients ``ids``, hosted by the real client runtime (one stream, under a host
    certificate for them)."""
    ensure_host_cert(server.keys.root, format_ids(ids))
    client_options = ClientOptions(server=server.address, ids=ids, keys=server.keys.root, **{"connect_timeout_s": 10.0, **options})
    live = LiveClients(threading.Thread(target=lambda: None))

    def run() -> None:
        live.outcomes.update(run_clients(client_options, say=lambda line: None))

    live.thread = threading.Thread(target=run, daemon=True, name="live-clients")
    live.thread.start()
    return live


def raw_channel(server: LiveServer, client: int, *, max_message_bytes: int = 2**20) -> grpc.Channel:
    """A TLS channel holding client ``client``'s certificate, for an attacker that speaks the
    wire format by hand."""
    return mtls_channel(server.address, server.keys, client, options=channel_options(max_message_bytes))


def open_stream(channel: grpc.Channel, *, timeout_s: float = 60.0) -> ClientStream:
    return ClientStream(channel, timeout_s=timeout_s)


@dataclass
class Run:
    """A server process and its folders; clients are started by the test."""

    local: LocalRun
    keys: Path

    @property
    def server(self) -> subprocess.Popen:
        return self.local.server

    @property
    def port(self) -> str:
        return str(self.local.port)

    @property
    def out(self) -> Path:
        return self.local.out

    def client(self, ids: str, *extra: str) -> subprocess.Popen:
        return self.local.client(ids, *extra)

    def finish(self, timeout: float = 240) -> tuple[str, dict]:
        output = self.local.wait(timeout)
        return output, json.loads((self.out / "metrics.json").read_text())


def launch_run(work: Path, *, clients: int, plan_options: tuple[str, ...], backend: str = "mask", extra: tuple[str, ...] = (),
               keys_for: int | None = None, plan: str = "fedavg-gru") -> Run:
    """A server process for ``plan`` with ``clients`` clients, its keys and folders in ``work``;
    the caller stops it (``run.local.stop``)."""
    keys = init_keys(work / "keys", clients=keys_for or clients).root
    args = ["--plan", plan, "--clients", str(clients), "--backend", backend, "--join-timeout", "60", "--step-timeout", "60"]
    for option in plan_options:
        args += ["--set", option]
    return Run(launch_server(work, *args, *extra, certs=keys), keys)
