"""Checks of a command line that need no torch: addresses, ports, certificates, folders and
data files, run before the heavy imports so a usage error is one line within a second, not
after the 5-10 s that importing torch, PyG and opacus takes.

Each check raises :class:`~secure_fedgraph.errors.ConfigError` (or DataNotFoundError) naming
the option; the command line prints it and exits with status 2.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

from secure_fedgraph.errors import ConfigError


def parse_address(option: str, text: str) -> tuple[str, int]:
    """HOST:PORT (IPv6 as [HOST]:PORT) with a port in 0..65535."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"{option} must be HOST:PORT with a port in 0..65535 (e.g. 127.0.0.1:50051), got {text!r}")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ConfigError(f"{option}: {host!r} is not an IPv6 address (write IPv6 hosts as [HOST]:PORT)") from None
    return host, int(port)


def check_bindable(option: str, text: str) -> None:
    """The address parses, resolves, and (unless the port is 0, any free port) is free now: a
    busy port is a one-line error here instead of a failure deep inside gRPC."""
    host, port = parse_address(option, text)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError(f"{option} {text}: cannot resolve {host!r} ({exc.strerror})") from None
    if port == 0:
        return
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        # as gRPC's listener does: connections a killed server left in TIME_WAIT do not hold the
        # port (server --resume on the same port), while another listener still does
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise ConfigError(f"{option} {text}: cannot listen there ({exc.strerror}); is another server running on that port?") from None


def check_files(what: str, paths: list[Path], hint: str) -> None:
    """Every path is a readable file; the first missing one is named, with ``hint``."""
    for path in paths:
        if not path.is_file():
            raise ConfigError(f"{what}: missing {path}; {hint}")
        if not os.access(path, os.R_OK):
            raise ConfigError(f"{what}: cannot read {path} (permissions)")


def check_writable_folder(option: str, folder: str | os.PathLike) -> None:
    """The folder exists or can be made, and a file can be written in it (it is made now: the
    command would make it first thing anyway)."""
    path = Path(folder).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".secure-fedgraph-write-check"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"{option} {folder}: cannot write there ({exc.strerror})") from None
