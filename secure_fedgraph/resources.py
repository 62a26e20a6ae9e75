"""What a process hosting many connections needs from the operating system, and what it used.

Every certificate holds its own TLS connection: a client process with a host certificate holds
one, and a server of n clients in such processes a few; without host certificates every logical
client holds its own, so a server of n clients holds n sockets and a client process hosting k
clients holds k: at n = 1,000 the usual soft limit of 1,024 open files is too low. :func:`ensure_open_files` raises the soft limit up to the hard one at
start, or stops with one line naming both limits. :func:`usage` is what a run reports
(metrics.json, the client process's last line) so that leaks and peaks can be read off.
"""

from __future__ import annotations

import os
import resource
import threading
from dataclasses import asdict, dataclass

from secure_fedgraph.errors import ConfigError

__all__ = ["EXTRA_STREAMS", "RESERVED_FILES", "ProcessUsage", "ensure_client_files", "ensure_open_files", "ensure_server_files", "usage"]

# what a process opens besides its clients' connections: the interpreter, torch, gRPC's own
# descriptors (epoll, wake-up pipes), the listening socket, metrics and logs
RESERVED_FILES = 64
EXTRA_STREAMS = 8  # streams a server admits beyond one per client (server/runtime.py: n + 8)


def ensure_server_files(clients: int) -> int:
    """:func:`ensure_open_files` for a server of ``clients``: a connection each, plus the
    extra streams it admits."""
    return ensure_open_files(clients + EXTRA_STREAMS + RESERVED_FILES, what=f"a server for {clients} clients")


def ensure_client_files(streams: int, *, clients: int | None = None, transcripts: int = 0) -> int:
    """:func:`ensure_open_files` for a client process hosting ``clients`` (default ``streams``)
    on ``streams`` connections (one with a host certificate, else one per client), with
    ``transcripts`` transcript files."""
    return ensure_open_files(streams + transcripts + RESERVED_FILES, what=f"a client process hosting {clients or streams} clients")


def ensure_open_files(needed: int, *, what: str) -> int:
    """Make sure this process may open ``needed`` files: raise the soft RLIMIT_NOFILE to the
    hard limit if it is lower; returns the soft limit now in force.

    Raises:
        ConfigError: the hard limit is below ``needed`` (only an administrator can raise it).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return soft
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise ConfigError(
            f"{what} needs about {needed} open files (one connection per client), but this process may open at most {hard} "
            f"(the hard limit, `ulimit -Hn`); raise it (e.g. `nofile` in /etc/security/limits.conf, or LimitNOFILE= for a "
            f"systemd service) or host fewer clients per process"
        )
    target = needed if hard == resource.RLIM_INFINITY else hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


@dataclass(frozen=True)
class ProcessUsage:
    """A snapshot of this process: open files and threads now (None where /proc is missing),
    resident memory now and at its peak so far."""

    open_files: int | None
    threads: int
    rss_bytes: int | None
    peak_rss_bytes: int

    def as_dict(self) -> dict[str, int | None]:
        return asdict(self)


def usage() -> ProcessUsage:
    """This process now: /proc/self/fd and /proc/self/status (VmRSS, VmHWM) where there is a
    /proc (Linux); elsewhere ``getrusage`` for the peak."""
    try:
        open_files: int | None = len(os.listdir("/proc/self/fd")) - 1  # less the descriptor listdir itself holds
    except OSError:
        open_files = None
    memory: dict[str, int] = {}
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    memory[line[:5]] = int(line.split()[1]) * 1024
    except OSError:
        pass
    peak = memory.get("VmHWM", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)  # ru_maxrss: KiB on Linux, bytes on macOS
    return ProcessUsage(open_files, _os_threads(), memory.get("VmRSS"), peak)


def _os_threads() -> int:
    """Threads of this process as the OS counts them (gRPC's own included)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()
