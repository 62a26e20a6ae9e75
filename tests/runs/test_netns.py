"""runs/netns.py: hosts with their own addresses reach each other over the bridge until a link is
cut and again once it is restored, a shaped link has its token-bucket filter both ways, and every namespace goes away on
leaving, also after a failure. Skipped, with the reason, where namespaces cannot be made."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from secure_fedgraph.runs import netns

_UNAVAILABLE = netns.unavailable()
pytestmark = pytest.mark.skipif(_UNAVAILABLE is not None, reason=str(_UNAVAILABLE))

# Listens on the host's address, then reports whether a connection from the other host arrived.
_LISTEN = ("import socket, sys; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
           "s.bind((sys.argv[1], 5000)); s.listen(); s.settimeout(float(sys.argv[2])); print('ready', flush=True)\ntry:\n    s.accept(); print('connected')\nexcept OSError:\n    print('nothing')")
_CONNECT = ("import socket, sys\ntry:\n    socket.create_connection((sys.argv[1], 5000), timeout=float(sys.argv[2])); print('connected')\n"
            "except OSError as exc:\n    print(type(exc).__name__)")


def _namespaces() -> set[str]:
    return {line.split()[0] for line in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines() if line}


def _connect(net: netns.Network, *, timeout_s: float) -> tuple[str, str]:
    """What the listener on host x and the connecting host y each saw."""
    listener = subprocess.Popen([*net["x"].prefix, sys.executable, "-c", _LISTEN, net["x"].address, str(timeout_s)], stdout=subprocess.PIPE, text=True)
    assert listener.stdout.readline().strip() == "ready"
    client = subprocess.run([*net["y"].prefix, sys.executable, "-c", _CONNECT, net["x"].address, str(timeout_s)], capture_output=True, text=True)
    return listener.communicate(timeout=timeout_s + 10)[0].strip(), client.stdout.strip()


def test_hosts_talk_over_their_addresses_until_a_link_is_cut():
    with netns.network(["x", "y"], tag=f"sfgt{os.getpid()}") as net:
        assert (net["x"].address, net["y"].address) == ("10.77.0.1", "10.77.0.2")
        assert _connect(net, timeout_s=5) == ("connected", "connected")
        net.cut("y")
        assert _connect(net, timeout_s=1) == ("nothing", "TimeoutError")  # its packets go nowhere, and nothing says so
        net.restore("y")
        assert _connect(net, timeout_s=5) == ("connected", "connected")  # plugged back in


def test_a_shaped_link_is_shaped_both_ways():
    with netns.network(["x"], tag=f"sfgt{os.getpid()}") as net:
        net.shape("x", rate="100mbit", burst="32kbit", latency="400ms")
        for namespace, device in ((net["x"].namespace, "eth0"), (net.bridge, net["x"].port)):
            shown = subprocess.run(["ip", "netns", "exec", namespace, netns.TC, "qdisc", "show", "dev", device], capture_output=True, text=True).stdout
            assert "tbf" in shown and "rate 100Mbit" in shown, shown


def test_every_namespace_is_removed_after_a_failure():
    tag = f"sfgt{os.getpid()}"
    with pytest.raises(RuntimeError, match="the test failed"):
        with netns.network(["x", "y"], tag=tag) as net:
            made = {net.bridge, net["x"].namespace, net["y"].namespace}
            assert made <= _namespaces()
            raise RuntimeError("the test failed")
    assert not made & _namespaces()


def test_a_failed_command_names_itself():
    with netns.network(["x"], tag=f"sfgt{os.getpid()}") as net:
        with pytest.raises(netns.NetworkError, match=r"`ip -n sfgt\d+-br link set nosuchport down` failed"):
            net.hosts["ghost"] = netns.Host("ghost", "none", "10.77.0.9", "nosuchport")
            net.cut("ghost")


def test_the_command_line_keeps_hosts_until_terminated_then_removes_them():
    """``python -m secure_fedgraph.runs.netns``: what docs/deploy.md uses to try a deployment on one machine."""
    import signal

    tag = f"sfgc{os.getpid()}"
    held = subprocess.Popen([sys.executable, "-m", "secure_fedgraph.runs.netns", "server", "h0", "--tag", tag], stdout=subprocess.PIPE, text=True)
    try:
        said = [held.stdout.readline().strip() for _ in range(3)]
        assert said == [f"netns: server is namespace {tag}-server at 10.77.0.1 (ip netns exec {tag}-server ...)",
                        f"netns: h0 is namespace {tag}-h0 at 10.77.0.2 (ip netns exec {tag}-h0 ...)", "netns: until interrupted"]
        assert {f"{tag}-server", f"{tag}-h0", f"{tag}-br"} <= _namespaces()
        held.send_signal(signal.SIGTERM)
        assert held.wait(timeout=30) == 0 and held.stdout.read().strip() == "netns: removed"
    finally:
        if held.poll() is None:
            held.kill()
    assert not {f"{tag}-server", f"{tag}-h0", f"{tag}-br"} & _namespaces()
