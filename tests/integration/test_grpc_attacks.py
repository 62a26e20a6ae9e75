"""Attacks on the gRPC runtime by a malicious client, over a real TLS socket on 127.0.0.1, with
the server's transport running in this process so one defence can be switched off."""

from __future__ import annotations

import threading
import time

import grpc
import numpy as np

from secure_fedgraph import __version__
from secure_fedgraph.crypto.pki import init_keys
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.core.messages import Hello
from secure_fedgraph.protocol.transports import grpc_server as transport_module
from secure_fedgraph.protocol.transports.batch import Frame
from secure_fedgraph.protocol.transports.grpc_client import ClientStream
from secure_fedgraph.protocol.transports.grpc_server import GrpcServerTransport, HostConnection
from tests.helpers import defence_stops
from tests.helpers.grpc import mtls_channel, transport_server


def test_attack_a_client_joining_under_another_clients_id(monkeypatch, tmp_path):
    """Client 1, holding its own valid certificate, opens a stream whose Hello claims to be
    client 0. A stream speaks for its certificate's client: the server refuses it, and client
    0's place stays free (threat_model.md R-MTLS); a server taking the Hello's word would seat
    client 1 as client 0."""
    keys = init_keys(tmp_path / "keys", clients=2)

    def attack() -> bool:
        with transport_server(keys, step_timeout_s=5) as (transport, port), mtls_channel(f"127.0.0.1:{port}", keys, 1) as channel:
            stream = ClientStream(channel, timeout_s=10)
            stream.send_frames([Frame(0, codec.encode(Hello(0, __version__)))])  # "I am client 0"
            joined = transport.wait_for_clients(3.0)
            stream.cancel()
        return 0 in joined

    defence_stops(attack, monkeypatch, transport_module, "stream_identity", lambda certified, hello: hello.client)


def test_attack_a_host_answering_for_a_client_its_certificate_does_not_name(monkeypatch, tmp_path):
    """The host of client 0 (its certificate names client 0 only) joins, then answers a step for
    client 0 and also for client 1, whose own host stays silent. Each frame must come from the
    stream its client joined on: the forged answer is ignored and client 1 is silent (R-MTLS,
    per frame); a server taking any frame on any stream would accept it as client 1's answer."""
    from secure_fedgraph.protocol.core.messages import SERVER, Ack, EndRequest, Header
    from secure_fedgraph.protocol.core.stages import Stage
    from secure_fedgraph.protocol.core.steps import Step

    keys = init_keys(tmp_path / "keys", clients=2)

    def attack() -> bool:
        with transport_server(keys, step_timeout_s=2) as (transport, port), mtls_channel(f"127.0.0.1:{port}", keys, 0) as forger_channel, \
                mtls_channel(f"127.0.0.1:{port}", keys, 1) as victim_channel:
            forger, victim = ClientStream(forger_channel, timeout_s=10), ClientStream(victim_channel, timeout_s=10)
            forger.hello([0], __version__)
            victim.hello([1], __version__)  # joins, then never answers
            assert transport.wait_for_clients(5.0) == [0, 1]
            header = Header(bytes(16), 0, 1, Stage.END, SERVER)
            step = Step(Stage.END, {0: EndRequest(header, "x"), 1: EndRequest(header, "x")}, lambda c, r: None)

            def answer_for_both() -> None:
                next(forger.batches())
                for c in (0, 1):  # one batch each: a batch of two frames on a one-client stream is refused whole (R-FLOOD)
                    forger.send_frames([Frame(c, codec.encode(Ack(Header(bytes(16), 0, 1, Stage.END, c))))])

            threading.Thread(target=answer_for_both, daemon=True).start()
            outcome = transport.execute(step)
            forger.cancel()
            victim.cancel()
        assert 0 in outcome.accepted
        return 1 in outcome.accepted

    defence_stops(attack, monkeypatch, HostConnection, "speaks_for", lambda self, client: True)


# --- the server survives any client (threat_model.md R-CRASH, R-STREAMS, R-FLOOD) -------------
# These run the real server runtime and the real client runtime in this process over TLS
# sockets on 127.0.0.1 (tests/helpers/grpc.py): three honest clients and a fourth
# certificate the attacker holds.


def _welcome_of(stream: ClientStream):
    """Say Hello as client 3 and wait for the run's Welcome (the run starts once the honest
    clients joined)."""
    stream.hello([3], __version__)
    return codec.decode(next(stream.batches())[0].body)


def test_attack_an_error_while_handling_one_message_drops_its_sender_not_the_server(monkeypatch, tmp_path):
    """Client 3 answers the Welcome with a message that makes the server's handling raise an
    error nobody wrote a handler for: the overflowing tensor header, with the decoder's own
    defence (test_codec.py) switched off for the whole test to stand for any such bug. The
    server drops client 3 and the honest clients finish (R-CRASH); if only ProtocolErrors were
    caught, the error would end the server's run."""
    from secure_fedgraph.errors import ProtocolError
    from secure_fedgraph.protocol.transports.common import Traffic
    from tests.helpers import grpc as live
    from tests.protocol.transports.test_codec import overflowing_header

    monkeypatch.setattr(codec, "byte_size", lambda shape, dtype: int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)

    def only_protocol_errors(self, step, client, data):
        try:
            step.accept(client, codec.decode(data))
        except ProtocolError as exc:
            return str(exc)
        return None

    runs = iter(range(2))

    def attack() -> bool:
        server = live.start_server(tmp_path / f"run-{next(runs)}", clients=4)
        honest = live.start_clients(server, [0, 1, 2])
        with live.raw_channel(server, 3) as channel:
            stream = live.open_stream(channel)
            _welcome_of(stream)
            stream.send_frames([Frame(3, overflowing_header())])
            finished = server.finished() and honest.all_finished()
            stream.cancel()
        return not finished

    defence_stops(attack, monkeypatch, Traffic, "answer", only_protocol_errors)


def test_attack_many_silent_streams_under_one_certificate_keep_the_honest_clients_out(monkeypatch, tmp_path):
    """Client 3 opens twelve streams and says nothing on any. Each certificate holds one stream
    (R-STREAMS): the other eleven are refused at once, the honest clients join and finish. With
    as many streams as it likes, client 3 fills the n + 8 streams the server runs at once, and
    the honest clients are turned away (the run never starts)."""
    from tests.helpers import grpc as live

    runs = iter(range(2))

    def attack() -> bool:
        server = live.start_server(tmp_path / f"run-{next(runs)}", clients=4, join_timeout_s=6.0, hello_timeout_s=60.0)
        with live.raw_channel(server, 3) as channel:
            streams = [live.open_stream(channel) for _ in range(12)]
            time.sleep(1.0)  # every stream reached the server's handlers
            honest = live.start_clients(server, [0, 1, 2], connect_timeout_s=2.0)
            finished = honest.all_finished() and server.finished()
            for stream in streams:
                stream.cancel()
        return not finished

    defence_stops(attack, monkeypatch, GrpcServerTransport, "_claim", lambda self, certified: True)


def test_attack_a_stream_that_never_says_hello_is_cut_at_the_deadline(monkeypatch, tmp_path):
    """Client 3 opens a stream and stays silent, holding one of the server's handler threads.
    Past --hello-timeout the server cuts it with DEADLINE_EXCEEDED (R-STREAMS); without the
    deadline the thread is held for as long as client 3 likes."""
    from tests.helpers import grpc as live

    runs = iter(range(2))

    def attack() -> bool:
        server = live.start_server(tmp_path / f"run-{next(runs)}", clients=4, join_timeout_s=8.0, hello_timeout_s=1.0)
        ended = threading.Event()
        with live.raw_channel(server, 3) as channel:
            stream = live.open_stream(channel)

            def listen() -> None:
                try:
                    next(iter(stream))
                except grpc.RpcError:
                    pass
                ended.set()

            threading.Thread(target=listen, daemon=True).start()
            held = not ended.wait(5.0)
            stream.cancel()
        live.start_clients(server, [0, 1, 2]).wait()
        server.finished()
        return held

    defence_stops(attack, monkeypatch, GrpcServerTransport, "_await_hello", lambda self, box: box.get())


def test_attack_a_flood_from_a_joined_client_is_held_back_by_flow_control(monkeypatch, tmp_path):
    """Client 3 joins and at once sends sixteen 2 MiB messages while the server waits for the
    others. Its inbox holds one message; its reader stops pulling from gRPC, and HTTP/2 flow
    control holds client 3 back (R-FLOOD): the server never holds more than one of them. With an
    unbounded inbox the server takes in the whole flood (the 64 MB messages of the issue grew a
    server from 414 MB to 1,094 MB). The run then drops client 3 and finishes."""
    from secure_fedgraph.protocol.transports.grpc_server import Inbox
    from tests.helpers import grpc as live

    size, count = 2 * 2**20, 16
    runs = iter(range(2))

    def attack() -> bool:
        server = live.start_server(tmp_path / f"run-{next(runs)}", clients=4, max_message_bytes=4 * 2**20)
        with live.raw_channel(server, 3, max_message_bytes=4 * 2**20) as channel:
            stream = live.open_stream(channel)
            stream.hello([3], __version__)
            for i in range(count):
                stream.send(bytes([i]) * size)
            time.sleep(2.0)  # the server's reader takes in what flow control lets through
            honest = live.start_clients(server, [0, 1, 2])
            metrics = server.wait()
            assert honest.all_finished() and "3" in metrics["dropped"]
            stream.cancel()
        return metrics["inbox_peak_bytes"]["3"] > size

    defence_stops(attack, monkeypatch, GrpcServerTransport, "_inbox", lambda self: Inbox(0))


def test_attack_a_batch_repeating_its_senders_frame_is_refused_and_its_host_dropped(monkeypatch, tmp_path):
    """Client 3 answers the Welcome with one valid batch that repeats its own answer frame 200,000
    times (800 kB; issue 29's 2 million in 8 MB grew a server from 256 MB to 964 MB and wrote a
    160 MB metrics.json, and the sender stayed in the run). A batch carries at most one frame
    per client (R-FLOOD): the server refuses this one at its second frame, before it builds the
    others, drops client 3's stream with one line naming it and the count, and the honest
    clients finish; metrics.json stays small. With that check switched off the server builds
    all 200,000 frames, takes the first as client 3's answer and keeps it in the run."""
    from secure_fedgraph.protocol.core.messages import Header, Joined
    from secure_fedgraph.protocol.transports import batch as batch_module
    from tests.helpers import grpc as live
    from tests.protocol.transports.test_batch import repeated_frame_batch

    count = 200_000
    built: list[int] = []  # frames the server built per batch (the memory a batch costs it)
    decode = transport_module.decode_batch
    monkeypatch.setattr(transport_module, "decode_batch", lambda data, **kw: (frames := decode(data, **kw), built.append(len(frames)))[0])
    runs: list[tuple[dict, int, int]] = []  # metrics, metrics.json's size, the flood's

    def attack() -> bool:
        built.clear()
        server = live.start_server(tmp_path / f"run-{len(runs)}", clients=4)
        honest = live.start_clients(server, [0, 1, 2])
        with live.raw_channel(server, 3) as channel:
            stream = live.open_stream(channel)
            h = _welcome_of(stream).header
            flood = repeated_frame_batch(3, codec.encode(Joined(Header(h.session, h.round, h.step, h.stage, 3), bytes(32))), count)
            stream.send(flood)
            try:
                next(stream.batches())  # the next request: the server took the batch; else its verdict ends the stream
                kept = True
            except grpc.RpcError:
                kept = False
            stream.cancel()  # leaves the run either way
            metrics = server.wait()
        assert honest.all_finished() and metrics["clients_finished"] == 3 and set(metrics["dropped"]) == {"3"}
        runs.append((metrics, (server.out / "metrics.json").stat().st_size, len(flood)))
        return kept and max(built) == count

    defence_stops(attack, monkeypatch, batch_module, "one_frame_per_client", lambda seen, client, *, max_frames: None)
    metrics, size, sent = runs[0]
    refused = [line for line in metrics["events"] if "one stream" in line]
    assert refused == [f"dropped client 3 (one stream) at welcome: a batch of {count:,} frames ({sent:,} bytes) refused: client 3 "
                       f"is named by more than one frame (a batch carries at most one frame per client)"], refused
    assert size < 256 * 1024 and len(metrics["events"]) < 50, (size, len(metrics["events"]))


def test_attack_frames_that_answer_nothing_are_counted_not_logged_one_by_one(monkeypatch, tmp_path):
    """The host of client 0 sends 2,000 batches, each one frame for client 1 (whose certificate
    it does not hold), then its answer. Each frame is ignored (R-MTLS); the server logs the first
    and counts the rest (R-FLOOD: metrics ignored_frames), so its log and metrics.json do not
    grow with what a host sends. Logging each one, the server writes 2,000 lines."""
    from secure_fedgraph.protocol.core.messages import SERVER, Ack, EndRequest, Header
    from secure_fedgraph.protocol.core.stages import Stage
    from secure_fedgraph.protocol.core.steps import Step

    keys = init_keys(tmp_path / "keys", clients=2)
    extra = 2000

    def attack() -> bool:
        lines: list[str] = []
        with transport_server(keys, step_timeout_s=30) as (transport, port), mtls_channel(f"127.0.0.1:{port}", keys, 0) as flooder_channel, \
                mtls_channel(f"127.0.0.1:{port}", keys, 1) as honest_channel:
            transport.log = lines.append
            flooder, honest = ClientStream(flooder_channel, timeout_s=60), ClientStream(honest_channel, timeout_s=60)
            flooder.hello([0], __version__)
            honest.hello([1], __version__)
            assert transport.wait_for_clients(5.0) == [0, 1]
            header = Header(bytes(16), 0, 1, Stage.END, SERVER)
            step = Step(Stage.END, {0: EndRequest(header, "x"), 1: EndRequest(header, "x")}, lambda c, r: None)

            def answer(stream: ClientStream, client: int, foreign: int) -> None:
                next(stream.batches())
                for _ in range(foreign):
                    stream.send_frames([Frame(1, b"not yours")])
                stream.send_frames([Frame(client, codec.encode(Ack(Header(bytes(16), 0, 1, Stage.END, client))))])

            threads = [threading.Thread(target=answer, args=(flooder, 0, extra), daemon=True),
                       threading.Thread(target=answer, args=(honest, 1, 0), daemon=True)]
            for thread in threads:
                thread.start()
            outcome = transport.execute(step)  # client 0's answer comes after its 2,000 batches: every one was read
            ignored = transport.ignored_frames()
            flooder.cancel()
            honest.cancel()
        assert outcome.accepted == {0, 1} and ignored == {"client 0": extra}
        return sum("ignored a frame for client 1" in line for line in lines) > 1

    defence_stops(attack, monkeypatch, GrpcServerTransport, "_ignore", lambda self, connection, line: (
        setattr(connection, "ignored", connection.ignored + 1), self.log(line)))
