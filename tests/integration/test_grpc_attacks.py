"""Attacks on the gRPC runtime by a malicious client, over a real TLS socket on 127.0.0.1, with
the server's transport running in this process so one defence can be switched off."""

from __future__ import annotations

from concurrent import futures

import grpc

from secure_fedgraph import __version__
from secure_fedgraph.crypto.pki import init_keys
from secure_fedgraph.protocol import codec
from secure_fedgraph.protocol.messages import Hello
from secure_fedgraph.protocol.transports import grpc as transport_module
from secure_fedgraph.protocol.transports.grpc import ClientStream, GrpcServerTransport, make_server_handler
from tests.helpers import defence_stops


def test_attack_a_client_joining_under_another_clients_id(monkeypatch, tmp_path):
    """Client 1, holding its own valid certificate, opens a stream whose Hello claims to be
    client 0. A stream speaks for its certificate's client: the server refuses it, and client
    0's place stays free (threat_model.md R-MTLS); a server taking the Hello's word would seat
    client 1 as client 0."""
    keys = init_keys(tmp_path / "keys", clients=2)

    def attack() -> bool:
        transport = GrpcServerTransport({0, 1}, step_timeout_s=5)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        server.add_generic_rpc_handlers((make_server_handler(transport),))
        credentials = grpc.ssl_server_credentials([(keys.server_key.read_bytes(), keys.server_cert.read_bytes())],
                                                  root_certificates=keys.ca.read_bytes(), require_client_auth=True)
        port = server.add_secure_port("127.0.0.1:0", credentials)
        server.start()
        try:
            mine = grpc.ssl_channel_credentials(root_certificates=keys.ca.read_bytes(), private_key=keys.client_key(1).read_bytes(),
                                                certificate_chain=keys.client_cert(1).read_bytes())
            with grpc.secure_channel(f"127.0.0.1:{port}", mine, options=[("grpc.ssl_target_name_override", "localhost")]) as channel:
                stream = ClientStream(channel, timeout_s=10)
                stream.send(codec.encode(Hello(0, __version__)))  # "I am client 0"
                joined = transport.wait_for_clients(3.0)
                stream.cancel()
            return 0 in joined
        finally:
            transport.close_all()
            server.stop(0)

    defence_stops(attack, monkeypatch, transport_module, "stream_identity", lambda certified, hello: hello.client)
