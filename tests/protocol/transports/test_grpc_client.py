"""The client half of the gRPC transport (protocol/transports/grpc_client.py): how a client
process connects (turned away at the server's stream limit, it tries again and joins,
threat_model.md R-STREAMS)."""

from __future__ import annotations

import threading
import time

import grpc

from secure_fedgraph.crypto.pki import init_keys
from secure_fedgraph.protocol.core.messages import SERVER, Ack, EndRequest, Header
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.protocol.core.steps import Step
from secure_fedgraph.protocol.transports import grpc_client
from secure_fedgraph.protocol.transports.grpc_client import ClientStream, Waiting
from tests.helpers import defence_stops
from tests.helpers.grpc import mtls_channel, transport_server


def test_attack_a_client_turned_away_at_the_stream_limit_tries_again_and_joins(monkeypatch, tmp_path):
    """The server runs one stream at once (the runtime's n + 8, made small), and client 0 holds
    it, silent, when client 1's process connects: gRPC turns client 1 away with
    RESOURCE_EXHAUSTED ("Concurrent RPC limit exceeded!"). Client 1 tries again with the backoff
    and within the --connect-timeout it uses while nobody listens (UNAVAILABLE), and joins once
    the server cuts client 0 at its --hello-timeout (R-STREAMS). Giving up on RESOURCE_EXHAUSTED
    at once, client 1 is kept out of the run."""
    keys = init_keys(tmp_path / "keys", clients=2)
    waiting = Waiting(120.0, "--connect-timeout", "waited {s:g} s for the server")

    def attack() -> bool:
        with transport_server(keys, step_timeout_s=30, hello_timeout_s=2.0, streams=1) as (transport, port), \
                mtls_channel(f"127.0.0.1:{port}", keys, 0) as holder_channel, mtls_channel(f"127.0.0.1:{port}", keys, 1) as channel:
            holder = ClientStream(holder_channel, timeout_s=30)  # says nothing: holds the one stream until --hello-timeout
            deadline = time.monotonic() + 10
            while 0 not in transport.streams:
                assert time.monotonic() < deadline, "the holder's stream never reached the server"
                time.sleep(0.01)
            turned_away: list[grpc.RpcError] = []
            joined_on: list[grpc_client.ClientConnection] = []  # held until the step is over: a stream dropped with its last reference is cancelled

            def join() -> None:
                try:
                    connection = grpc_client.connect(channel, [1], version="test", waiting=waiting, timeout_s=None, max_message_bytes=2**20)
                except grpc.RpcError as exc:
                    turned_away.append(exc)
                    return
                connection.send([connection.answer(1, Ack(Header(bytes(16), 0, 1, Stage.END, 1)))])  # answers the request it joined on
                joined_on.append(connection)

            thread = threading.Thread(target=join, daemon=True)
            thread.start()
            deadline = time.monotonic() + 90  # a few seconds here; generous for a machine busy with the other worker
            while 1 not in transport.connections and thread.is_alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            joined = transport.wait_for_clients(0.0)
            outcome = transport.execute(Step(Stage.END, {1: EndRequest(Header(bytes(16), 0, 1, Stage.END, SERVER), "x")}, lambda c, r: None)) \
                if joined else None
            thread.join(30)
            for connection in joined_on:
                connection.close()
            holder.cancel()
        print("state after the attempt (shown if the test fails):", "joined", joined, "outcome", outcome, "turned away",
              [(e.code(), e.details()) for e in turned_away], "connecting", thread.is_alive(), "codes", codes, flush=True)
        if turned_away:
            assert turned_away[0].code() == grpc.StatusCode.RESOURCE_EXHAUSTED, turned_away
        return outcome is None or 1 not in outcome.accepted

    def gives_up_on_resource_exhausted(exc: grpc.RpcError) -> bool:
        return exc.code() == grpc.StatusCode.UNAVAILABLE and not any(w in (exc.details() or "").lower() for w in ("ssl_error", "certificate", "tsi_", "alert"))

    codes: list[grpc.StatusCode] = []  # what client 1 was told before it joined (with the defence on)
    retries = grpc_client.server_not_up
    monkeypatch.setattr(grpc_client, "server_not_up", lambda exc: (codes.append(exc.code()), retries(exc))[1])
    defence_stops(attack, monkeypatch, grpc_client, "server_not_up", gives_up_on_resource_exhausted)
    assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes, codes  # it was turned away, and tried again
