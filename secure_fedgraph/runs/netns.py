"""Hosts with their own network stacks and addresses on one machine: a Linux network namespace per
host, each joined by a veth pair to a bridge in a namespace of its own, so a server and client
hosts talk over real IP addresses and links that can be cut or rate-limited. Written once for
tests/integration/test_hosts.py and benchmarks/hosts.py; it needs root and iproute2 (``ip``,
``tc``).

Layout for hosts ``server``, ``a``, ``b`` (names made unique by ``tag``, e.g. the process id, so
parallel test workers never collide; addresses repeat freely, since every network is its own)::

    namespace <tag>-br:      bridge br0, ports p0, p1, p2 (the switch side of each host's link)
    namespace <tag>-server:  eth0 10.77.0.1/24  <->  p0
    namespace <tag>-a:       eth0 10.77.0.2/24  <->  p1
    namespace <tag>-b:       eth0 10.77.0.3/24  <->  p2

A process runs on a host behind :attr:`Host.prefix` (``ip netns exec <namespace>``).
:meth:`Network.cut` takes a host's link down on the switch side (the host's cable pulled: its
packets go nowhere and nothing tells its peers) and :meth:`Network.restore` plugs it back in;
:meth:`Network.shape` puts a token-bucket
filter on both directions of a link. Closing the network deletes its namespaces, and with them
every link and filter inside.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

__all__ = ["Host", "Network", "NetworkError", "network", "unavailable"]

TC = shutil.which("tc") or "/usr/sbin/tc"


class NetworkError(RuntimeError):
    """An ``ip`` or ``tc`` command failed; the message names it and carries its error output."""


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise NetworkError(f"`{' '.join(argv)}` failed (exit {done.returncode}): {done.stderr.strip() or done.stdout.strip()}")


@dataclass(frozen=True)
class Host:
    """One host: its namespace, its address and the switch-side port of its link."""

    label: str
    namespace: str
    address: str
    port: str

    @property
    def prefix(self) -> tuple[str, ...]:
        """The command prefix that runs a process on this host."""
        return ("ip", "netns", "exec", self.namespace)


@dataclass
class Network:
    """Hosts on one bridge (see the module docstring); :func:`network` makes and removes it."""

    bridge: str
    hosts: dict[str, Host] = field(default_factory=dict)

    def __getitem__(self, label: str) -> Host:
        return self.hosts[label]

    def cut(self, label: str) -> None:
        """Take ``label``'s link down at the switch: from now on its packets are lost both ways."""
        _run("ip", "-n", self.bridge, "link", "set", self.hosts[label].port, "down")

    def restore(self, label: str) -> None:
        """Bring ``label``'s link up again at the switch (the cable plugged back in)."""
        _run("ip", "-n", self.bridge, "link", "set", self.hosts[label].port, "up")

    def shape(self, label: str, *, rate: str, burst: str, latency: str) -> None:
        """A token-bucket filter (``tc qdisc add ... root tbf``) on both directions of ``label``'s
        link: the host's side shapes what it sends, the switch side what it receives."""
        host = self.hosts[label]
        for namespace, device in ((host.namespace, "eth0"), (self.bridge, host.port)):
            _run("ip", "netns", "exec", namespace, TC, "qdisc", "add", "dev", device, "root", "tbf", "rate", rate, "burst", burst,
                 "latency", latency)


def _delete(namespace: str) -> None:
    subprocess.run(["ip", "netns", "delete", namespace], capture_output=True, check=False)


@contextlib.contextmanager
def network(labels: Sequence[str], *, tag: str | None = None, subnet: str = "10.77.0") -> Iterator[Network]:
    """Hosts ``labels`` at ``subnet``.1, .2, ... (in order) on one bridge, each in its own
    namespace; every namespace is deleted on leaving, also after a failure.

    Raises:
        NetworkError: an ``ip`` command failed (not root, no namespaces, a name taken).
    """
    if not 1 <= len(labels) <= 250 or len(set(labels)) != len(labels):
        raise ValueError(f"labels: expected 1 to 250 distinct host labels, got {list(labels)}")
    tag = tag or f"sfg{os.getpid()}"
    made: list[str] = []
    net = Network(f"{tag}-br")
    try:
        _run("ip", "netns", "add", net.bridge)
        made.append(net.bridge)
        _run("ip", "-n", net.bridge, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", net.bridge, "link", "set", "br0", "up")
        for i, label in enumerate(labels):
            host = Host(label, f"{tag}-{label}", f"{subnet}.{i + 1}", f"p{i}")
            _run("ip", "netns", "add", host.namespace)
            made.append(host.namespace)
            _run("ip", "link", "add", "eth0", "netns", host.namespace, "type", "veth", "peer", "name", host.port, "netns", net.bridge)
            _run("ip", "-n", net.bridge, "link", "set", host.port, "master", "br0", "up")
            _run("ip", "-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
            _run("ip", "-n", host.namespace, "link", "set", "eth0", "up")
            _run("ip", "-n", host.namespace, "link", "set", "lo", "up")
            net.hosts[label] = host
        yield net
    finally:
        for namespace in reversed(made):
            _delete(namespace)


def unavailable() -> str | None:
    """Why hosts cannot be made here (one line), or None where they can: not root, no ``ip``, or
    ``ip netns add`` refused (a container without the capability)."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2) to make network namespaces"
    probe = f"sfg{os.getpid()}-probe"
    try:
        _run("ip", "netns", "add", probe)
    except NetworkError as exc:
        return f"cannot create a network namespace here: {exc}"
    finally:
        _delete(probe)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m secure_fedgraph.runs.netns [--tag T] LABEL...``: make the hosts, print each one's
    namespace and address, and keep them until interrupted or terminated (SIGINT, SIGTERM), then
    remove them: hosts to try docs/deploy.md on one machine, each command behind ``ip netns exec``."""
    import argparse
    import signal
    import sys

    parser = argparse.ArgumentParser(prog="python -m secure_fedgraph.runs.netns", description=main.__doc__.split(":", 1)[0])
    parser.add_argument("labels", nargs="+", metavar="LABEL", help="host names, in address order from 10.77.0.1")
    parser.add_argument("--tag", default="sfg", help="namespace prefix: namespaces TAG-LABEL and TAG-br (default sfg)")
    args = parser.parse_args(argv)
    reason = unavailable()
    if reason is not None:
        print(f"netns: {reason}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # as an interrupt: out through the context manager, which removes them
    try:
        with network(args.labels, tag=args.tag) as net:
            for host in net.hosts.values():
                print(f"netns: {host.label} is namespace {host.namespace} at {host.address} (ip netns exec {host.namespace} ...)", flush=True)
            print("netns: until interrupted", flush=True)
            signal.pause()
    except KeyboardInterrupt:
        pass
    except NetworkError as exc:
        print(f"netns: {exc}", file=sys.stderr)
        return 1
    print("netns: removed", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
