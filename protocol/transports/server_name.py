"""The name a client checks the server's certificate against (``client --server-name``), when it
is not one the certificate carries: gRPC fails that handshake with "Hostname Verification Check
failed" and no more, and retrying cannot help (the certificate will not change), so the client
stops at once with one line naming the option and the names the certificate does carry.

Those names come from a TLS handshake of our own, under the client's certificate, checking the
server's against the run's CA but not its name: only a certificate the run's CA issued is read,
and nothing is sent over the connection.
"""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import grpc
from cryptography import x509

# what gRPC says when the name is not the certificate's (newer and older wordings)
_MISMATCH = ("hostname verification check failed", "not in peer certificate")


def name_mismatch(exc: grpc.RpcError) -> bool:
    """Whether a failed stream means the server's certificate does not carry the name the client
    checks it against (a mistake in ``--server-name``, not a server that is not up)."""
    details = (exc.details() or "").lower() if hasattr(exc, "details") else ""
    return any(words in details for words in _MISMATCH)


def certificate_names(server: str, *, ca: bytes, cert: Path, key: Path, timeout_s: float = 5.0) -> list[str] | None:
    """The DNS names and IP addresses in the certificate of the server at ``server`` (HOST:PORT,
    checked by the command line), verified against ``ca`` (not against a name), reached under
    this client's ``cert`` and ``key``; None if it cannot be read (the server went away, or its
    certificate is not the CA's)."""
    host, _, port = server.rpartition(":")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False  # the name is what is in question; the chain is still checked
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=ca.decode())
    context.load_cert_chain(cert, key)
    context.set_alpn_protocols(["h2"])
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as raw, context.wrap_socket(raw) as tls:
            der = tls.getpeercert(binary_form=True)
    except (OSError, ValueError):  # ssl.SSLError is an OSError; ValueError: a port that is not a number
        return None
    try:
        names = x509.load_der_x509_certificate(der).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        return []
    return [*names.get_values_for_type(x509.DNSName), *(str(ip) for ip in names.get_values_for_type(x509.IPAddress))]


def mismatch_line(server: str, server_name: str, *, ca: bytes, cert: Path, key: Path) -> str:
    """The one line a client stops with when the certificate of the server at ``server`` does not
    name ``server_name``."""
    names = certificate_names(server, ca=ca, cert=cert, key=key)
    fix = f"(or issue the server a certificate naming {server_name}: keys init --server-name / --server-ip)"
    if names:
        return (f"--server-name {server_name}: the certificate of the server at {server} names {', '.join(names)}, not {server_name}; "
                f"pass {'that' if len(names) == 1 else 'one of those'} as --server-name {fix}")
    return (f"--server-name {server_name}: the certificate of the server at {server} does not name {server_name} (TLS: Hostname "
            f"Verification Check failed); pass the name or address its certificate carries as --server-name {fix}")
