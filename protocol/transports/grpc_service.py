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

# Keepalive (gRPC's doc/keepalive.md): each side pings its peer after KEEPALIVE_MS without a ping,
# and closes the connection when a ping goes unanswered for KEEPALIVE_TIMEOUT_MS (gRPC also sets
# TCP_USER_TIMEOUT to it: data unacknowledged that long closes the socket). A peer whose link
# died, or whose process hangs, thus fails its stream within KEEPALIVE_MS + KEEPALIVE_TIMEOUT_MS
# (about 30 s), and the server drops its clients at once (grpc_server.py) instead of at the
# step's deadline (--step-timeout, 120 s). Unlimited pings without data: gRPC's default stops
# pinging after 2 while nothing else is sent, which is most of a long step's wait.
KEEPALIVE_MS = 10_000
KEEPALIVE_TIMEOUT_MS = 20_000


def channel_options(max_message_bytes: int) -> list[tuple[str, int]]:
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.keepalive_time_ms", KEEPALIVE_MS),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        ("grpc.http2.ping_timeout_ms", KEEPALIVE_TIMEOUT_MS),  # gRPC 1.85 times a keepalive ping out by this (default 60 s)
        ("grpc.http2.max_pings_without_data", 0),
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

