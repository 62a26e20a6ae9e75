"""Mistakes in a client's TLS set-up, which no retry mends: the client stops at once with one
line that says what to fix, instead of waiting out ``--connect-timeout`` for a server that is up.

- The server's certificate does not carry the name the client checks (``client --server-name``):
  gRPC says "Hostname Verification Check failed" and no more; the line names the option and the
  names the certificate does carry.
- The server's certificate fails the check against the CA the client trusts (``ca.pem`` in
  ``--certs``: another CA signed it, or it expired): gRPC says the handshake failed on a
  certificate; the line gives OpenSSL's reason.
- The server does not accept this client's certificate (another CA issued it, or it expired):
  gRPC says only "Socket closed", as it would of a server going away at that moment. A gRPC
  server sends its HTTP/2 settings at once to a client it accepts, so the client looks: a
  handshake that the server completes and then closes without a byte is a refusal.

Each look is a TLS handshake of our own under the client's certificate, checking the server's
against the run's CA but not its name: only a certificate the run's CA issued is read, and
nothing is sent over the connection. A look that cannot tell (the server went away, a timeout)
finds no mistake, and the client goes on as before: it waits, or reports gRPC's own words.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
from cryptography import x509

from secure_fedgraph.errors import ConfigError

# what gRPC says when the name is not the certificate's (newer and older wordings)
_MISMATCH = ("hostname verification check failed", "not in peer certificate")
_CERTIFICATE_FAILED = ("ssl_error", "certificate", "tsi_", "alert")  # a handshake refused on a certificate
_CLOSED = "socket closed"  # the server ended the connection: going away, or refusing this client's certificate


class TlsMistake(ConfigError):
    """A client's TLS set-up that no retry mends (the message says what to fix)."""


def _details(exc: grpc.RpcError) -> str:
    return (exc.details() or "").lower() if hasattr(exc, "details") else ""


def name_mismatch(exc: grpc.RpcError) -> bool:
    """Whether a failed stream means the server's certificate does not carry the name the client
    checks it against (a mistake in ``--server-name``, not a server that is not up)."""
    return any(words in _details(exc) for words in _MISMATCH)


@contextmanager
def _handshake(server: str, *, ca: bytes, cert: Path, key: Path, timeout_s: float) -> Iterator[ssl.SSLSocket]:
    """A TLS connection to ``server`` (HOST:PORT) under this client's ``cert`` and ``key``, the
    server's certificate checked against ``ca`` but not against a name. Raises OSError (ssl.SSLError
    among them) or ValueError (a port that is not a number)."""
    host, _, port = server.rpartition(":")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False  # the name is what may be in question; the chain is still checked
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=ca.decode())
    context.load_cert_chain(cert, key)
    context.set_alpn_protocols(["h2"])
    with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as raw, context.wrap_socket(raw) as tls:
        yield tls


def certificate_names(server: str, *, ca: bytes, cert: Path, key: Path, timeout_s: float = 5.0) -> list[str] | None:
    """The DNS names and IP addresses in the certificate of the server at ``server`` (HOST:PORT,
    checked by the command line), verified against ``ca`` (not against a name), reached under
    this client's ``cert`` and ``key``; None if it cannot be read (the server went away, or its
    certificate is not the CA's)."""
    try:
        with _handshake(server, ca=ca, cert=cert, key=key, timeout_s=timeout_s) as tls:
            der = tls.getpeercert(binary_form=True)
    except (OSError, ValueError):
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


def server_certificate_fails(server: str, *, ca: bytes, cert: Path, key: Path, timeout_s: float = 5.0) -> str | None:
    """Why the certificate of the server at ``server`` fails the check against ``ca`` (OpenSSL's
    words: "certificate signature failure", "certificate has expired"), or None if it passes or
    the look cannot tell (nobody answers, a timeout)."""
    try:
        with _handshake(server, ca=ca, cert=cert, key=key, timeout_s=timeout_s):
            return None
    except ssl.SSLCertVerificationError as exc:
        return exc.verify_message or "certificate verify failed"
    except (OSError, ValueError):
        return None


def refuses_certificate(server: str, *, ca: bytes, cert: Path, key: Path, timeout_s: float = 5.0) -> bool:
    """Whether the server at ``server`` completes a handshake under ``cert`` and then ends the
    connection without a byte (or with a TLS alert): it does not accept the certificate. False
    where the look cannot tell, and where the server speaks first, as a gRPC server does to a
    client it accepts (its HTTP/2 settings)."""
    try:
        with _handshake(server, ca=ca, cert=cert, key=key, timeout_s=timeout_s) as tls:
            return tls.recv(1) == b""
    except ssl.SSLError as exc:  # an alert, in the handshake (TLS 1.2) or after it (1.3), refuses this side's certificate;
        return "alert" in (exc.reason or "").lower()  # the server's failing the check against ``ca`` is the other mistake
    except (OSError, ValueError):  # nobody answers, a timeout
        return False


def tls_mistake(exc: grpc.RpcError, server: str, server_name: str, *, ca: bytes, cert: Path, key: Path, ca_file: Path,
                validity_days: int) -> str | None:
    """The one line a client stops with when ``exc`` (a failed stream to ``server``) comes of its
    TLS set-up (see the module's docstring), or None when it does not or the look cannot tell.
    ``validity_days``: how long the certificates ``keys init`` makes last (crypto/pki.py, which
    this floor does not import), for the line about an expired one."""
    details = _details(exc)
    if name_mismatch(exc):
        return mismatch_line(server, server_name, ca=ca, cert=cert, key=key)
    failed = server_certificate_fails(server, ca=ca, cert=cert, key=key) if any(w in details for w in _CERTIFICATE_FAILED) else None
    if failed is not None:
        expired = "expired" in failed or "not yet valid" in failed
        fix = (f"keys init certificates last {validity_days} days: make the run's keys again and give every host its folder" if expired
               else "the keys folder (--certs) must hold the run's ca.pem, from the folder `keys init` wrote for the server, or --server "
               "names another server")
        return f"the certificate of the server at {server} fails the check against the CA this client trusts ({ca_file}: {failed}): {fix}"
    if _CLOSED in details and refuses_certificate(server, ca=ca, cert=cert, key=key):
        return (f"the server at {server} ends connections under this client's certificate ({cert}) right after the TLS handshake: "
                "it does not accept it (not issued by the run's CA, or expired); take the certificate from the run's keys folder "
                "(keys init, or keys host for a host certificate)")
    return None
