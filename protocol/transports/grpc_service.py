"""The gRPC service both halves of the transport speak: one bidirectional stream per TLS
certificate (``FederatedSession.Session`` in proto/secure_fedgraph/wire/envelope.proto), carrying
batches of frames (protocol/transports/batch.py) whose bodies are Envelope bytes untouched by
gRPC, so our codec (not gRPC's deserializer) decides what is malformed and says why. The server
half is grpc_server.py, the client half grpc_client.py; this module holds what they agree on.
"""

from __future__ import annotations

import grpc

SERVICE = "secure_fedgraph.wire.FederatedSession"
METHOD = f"/{SERVICE}/Session"

KEEPALIVE_MS = 30_000  # both sides ping an idle connection this often


def channel_options(max_message_bytes: int) -> list[tuple[str, int]]:
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.keepalive_time_ms", KEEPALIVE_MS),
    ]


def server_options(max_message_bytes: int) -> list[tuple[str, int]]:
    """The channel options plus a ping allowance the clients' keepalive stays within: gRPC's
    server default accepts a ping without data every 5 minutes at most and answers more with
    GOAWAY ``too_many_pings``, which cut clients that had joined and were waiting."""
    return [*channel_options(max_message_bytes), ("grpc.http2.min_ping_interval_without_data_ms", KEEPALIVE_MS // 2)]



def describe_rpc_error(exc: grpc.RpcError) -> str:
    """A one-line explanation of why a stream ended."""
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    hint = ""
    if code == grpc.StatusCode.UNAVAILABLE and ("ssl" in (details or "").lower() or "handshake" in (details or "").lower()):
        hint = " (TLS handshake failed: is this client's certificate signed by the run's CA, and the server's by the CA this client trusts?)"
    return f"{getattr(code, 'name', code)}: {details}{hint}"

