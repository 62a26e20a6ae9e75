"""A dead peer is noticed by keepalive (protocol/transports/grpc_service.py), not at the step's
deadline: a client process that stops answering anything (SIGSTOP: its kernel still acknowledges
TCP, as a hung host's does, but no HTTP/2 ping is answered) fails its stream within about
KEEPALIVE_MS + KEEPALIVE_TIMEOUT_MS, and the server's step counts its client out then, long
before a step timeout of minutes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from secure_fedgraph.crypto.pki import init_keys
from secure_fedgraph.protocol.core.messages import SERVER, EndRequest, Header
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.protocol.core.steps import Step
from secure_fedgraph.protocol.transports.grpc_service import KEEPALIVE_MS, KEEPALIVE_TIMEOUT_MS
from tests.helpers.grpc import transport_server

# a client process on the production channel options: joins as client 0, then reads what comes
CLIENT = textwrap.dedent("""
    import sys
    from pathlib import Path
    from secure_fedgraph.crypto.pki import KeyDirectory
    from secure_fedgraph.protocol.transports.grpc_client import Waiting, connect, secure_channel

    keys = KeyDirectory(Path(sys.argv[2]))
    channel = secure_channel(f"127.0.0.1:{sys.argv[1]}", ca=keys.ca.read_bytes(), cert=keys.client_cert(0).read_bytes(),
                             key=keys.client_key(0).read_bytes(), server_name="localhost", max_message_bytes=2**20)
    connection = connect(channel, [0], version="test", waiting=Waiting(60.0, "--connect-timeout", "gave up"), timeout_s=None,
                         max_message_bytes=2**20)
    for batch in connection.incoming(lambda client: True):
        pass
""")
STEP_TIMEOUT_S = 300.0


def test_a_hung_client_is_counted_out_within_the_keepalive_not_at_the_step_deadline(tmp_path):
    """The client joins, its process is stopped, and the server asks it a step: the step ends
    once keepalive closes the connection (within KEEPALIVE_MS + KEEPALIVE_TIMEOUT_MS of the
    stop, with a few seconds' slack), with the client out of it as one that left, not timed out.
    With gRPC's pings every 30 s (as before) it took about 50 s; with its default of none, the
    step's whole deadline."""
    keys = init_keys(tmp_path / "keys", clients=2)
    events: list[str] = []
    bound_s = (KEEPALIVE_MS + KEEPALIVE_TIMEOUT_MS) / 1000 + 8.0
    with transport_server(keys, step_timeout_s=STEP_TIMEOUT_S) as (transport, port):
        transport.log = events.append
        child = subprocess.Popen([sys.executable, "-c", CLIENT, str(port), str(keys.root)])
        try:
            deadline = time.monotonic() + 60
            while 0 not in transport.connections:
                assert child.poll() is None and time.monotonic() < deadline, "the client process never joined"
                time.sleep(0.05)
            assert transport.wait_for_clients(0.0) == [0]
            os.kill(child.pid, signal.SIGSTOP)  # hung: nothing it runs answers, its kernel still acknowledges TCP
            stopped = time.monotonic()
            outcome = transport.execute(Step(Stage.END, {0: EndRequest(Header(bytes(16), 0, 1, Stage.END, SERVER), "x")}, lambda c, a: None))
            noticed = time.monotonic() - stopped
        finally:
            child.kill()
            os.kill(child.pid, signal.SIGCONT)
            child.wait(timeout=30)
    assert outcome.silent == frozenset({0}) and not outcome.accepted
    assert any(line.startswith("client 0 left at end: ") for line in events), events  # its stream failed: not "timed out"
    assert noticed < bound_s, f"the server noticed the hung client after {noticed:.1f} s (keepalive bound {bound_s:.0f} s): {events}"
