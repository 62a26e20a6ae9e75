"""``client``: host one or many logical clients of a run, under a security policy that holds
whatever the server announces (threat_model.md M-POLICY)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from secure_fedgraph.cli.arguments import Repeatable, count, positive_float
from secure_fedgraph.cli.keys_command import check_keys, has_host_cert
from secure_fedgraph.cli.secure_options import add_adversary_options, add_crash_option, adversary

if TYPE_CHECKING:  # the secure-sum package imports torch: the handler imports it, after the checks
    from secure_fedgraph.protocol.sum_backends import ClientPolicy


def add_parser(commands: argparse._SubParsersAction) -> None:
    """``client``, its security policy options among them."""
    client = commands.add_parser("client", help="host one or many logical clients of a run")
    client.add_argument("--server", required=True, help="HOST:PORT of the server")
    client.add_argument("--ids", required=True, help="client ids to host: 0-9, or 0,3,5-7")
    client.add_argument("--certs", required=True, help="folder with ca.pem, clients/client-<id>.identity, and either hosts/host-<ids>.{pem,key} for "
                        "exactly these --ids (one connection for all of them; keys init --hosts, keys host) or clients/client-<id>.{pem,key}")
    client.add_argument("--data-dir", default=None, help="data folder (default: $SECURE_FEDGRAPH_DATA, else the packaged data)")
    client.add_argument("--dataset", default=None, metavar="NAME|FOLDER",
                        help="the graph series these clients read: where the server's plan names a folder, this one (a client never "
                             "reads a folder the server names: threat_model.md R-DATASET); where it names a dataset, that name")
    policy = client.add_argument_group("security policy (what these clients accept, whatever the server announces; threat_model.md M-POLICY)")
    policy.add_argument("--backend", action=Repeatable, choices=["plain", "mask", "ckks"], default=["mask"],
                        help="backends these clients accept (repeatable; default mask only: ckks gives every input to one colluding "
                             "client, plain to the server)")
    policy.add_argument("--no-streaming", action="store_true",
                        help="refuse a run whose mask backend allows the streaming variant (threat_model.md M-STREAM)")
    policy.add_argument("--no-sparse", action="store_true", help="refuse the sparse neighbour graph (accept the complete graph only)")
    policy.add_argument("--min-survivors-fraction", type=float, default=0.5,
                        help="refuse sums over this fraction of the run's clients or fewer (default 0.5: a majority)")
    policy.add_argument("--min-run-clients", type=count(2), default=3,
                        help="refuse a run that started with fewer clients (default 3: in a run of two each client, and a server "
                             "colluding with one, reads the other's input from the sum)")
    policy.add_argument("--min-dp-sigma", type=float, default=1.0,
                        help="least DP noise multiplier on uploaded activations, for plans that upload them (cnfgnn, nfedgnn; default 1; "
                             "0 accepts no noise: the server then sees your hidden states as they are)")
    policy.add_argument("--reproducible-randomness", "--reproducible-dp-noise", dest="reproducible_dp_noise", action="store_true",
                        help="draw these clients' private randomness (DP noise and DP-SGD samples; nFedGNN's initial W_i and dropout "
                             "masks) from the run seed instead of fresh OS randomness, so a run can be compared with an in-process one; "
                             "for tests only: the server knows the run seed and can remove such noise and recompute such weights")
    policy.add_argument("--allow-seeded-randomness", action="store_true",
                        help="accept a plan that draws users' initial weights and dropout masks from the run seed (nfedgnn "
                             "user_randomness=run_seed); off by default: the server could recompute them and invert a user's first "
                             "latents (threat_model.md NF-INIT)")
    policy.add_argument("--min-ddp-noise", type=positive_float(zero_ok=True), default=0.0,
                        help="least distributed DP noise multiplier in any sum of this client's model (fedavg-gru, fedavg-vector) or "
                             "of its windows (fedstgd), counted over the fewest contributors this client lets a sum have and per unit of "
                             "a contribution's (fedstgd: a window's row's) rounded L2 sensitivity (the server's --set ddp_noise=z must "
                             "be about 1.41 Z or more); default 0: accept exact sums (threat_model.md DDP-FLOOR, ST-DDP-FLOOR)")
    policy.add_argument("--min-dpsgd-sigma", type=positive_float(zero_ok=True), default=0.0,
                        help="least DP-SGD noise multiplier of the plan's local training (fedavg-gru, local-gru, cnfgnn, fedrel, fedstgd: "
                             "--set dpsgd_sigma=S on the server); default 0: accept training without DP-SGD (threat_model.md DP-SGD-FLOOR)")
    add_adversary_options(policy)
    client.add_argument("--transcript", default=None, metavar="DIR", help="record what each client received and sent in DIR")
    client.add_argument("--audit", action="store_true", help="with --transcript: also record each client's own plaintext contributions (local files, for audits)")
    client.add_argument("--server-name", default="localhost", help="name to expect in the server's certificate (default localhost)")
    client.add_argument("--connect-timeout", type=positive_float(), default=60.0,
                        help="seconds to wait for a server that is not listening yet, retrying with backoff (default 60)")
    client.add_argument("--reconnect-timeout", type=positive_float(zero_ok=True), default=60.0,
                        help="seconds to wait, retrying with backoff, for a server that went away mid-run to come back (server "
                             "--resume); 0: do not wait (default 60)")
    client.add_argument("--session-timeout", type=positive_float(), default=24 * 3600.0, help="deadline of the whole run, seconds (default 24 h)")
    client.add_argument("--parallel", type=count(), default=2,
                        help="hosted clients handling a request at the same time (the workers each batch's frames go to; default 2; bounds memory)")
    add_crash_option(client, "this process, with every client it hosts, on receiving the N-th (default first) request of STAGE")
    client.set_defaults(handler=_client, check=_check)


def _check(args: argparse.Namespace) -> None:
    from secure_fedgraph import resources
    from secure_fedgraph.clients.ids import parse_ids
    from secure_fedgraph.runs import preflight

    preflight.parse_address("--server", args.server)
    ids = parse_ids(args.ids)
    streams = 1 if has_host_cert(args.certs, ids) else len(ids)
    resources.ensure_client_files(streams, clients=len(ids), transcripts=len(ids) if args.transcript is not None else 0)
    check_keys(args.certs, server=False, clients=ids)


def _policy(args: argparse.Namespace) -> ClientPolicy:
    """What these clients accept: the policy options and the adversary they assume."""
    from secure_fedgraph.protocol.sum_backends import Backend, ClientPolicy

    return ClientPolicy(adversary=adversary(args), min_survivors_fraction=args.min_survivors_fraction, allow_sparse=not args.no_sparse,
                        allow_streaming=not args.no_streaming, backends=frozenset(Backend(b) for b in args.backend),
                        min_dp_sigma=args.min_dp_sigma, min_ddp_noise=args.min_ddp_noise,
                        min_dpsgd_sigma=args.min_dpsgd_sigma, max_rekeys_per_round=args.max_rekeys,
                        allow_seeded_randomness=args.allow_seeded_randomness, min_run_clients=args.min_run_clients,
                        max_key_epochs=args.max_key_epochs)


def _client(args: argparse.Namespace) -> int:
    from secure_fedgraph.clients.ids import parse_ids
    from secure_fedgraph.clients.runtime import ClientOptions, run_clients, stop_reasons
    from secure_fedgraph.protocol.core.crash_point import CrashPoint

    options = ClientOptions(
        server=args.server,
        ids=parse_ids(args.ids),
        keys=Path(args.certs),
        data_dir=Path(args.data_dir) if args.data_dir else None,
        dataset=args.dataset,
        policy=_policy(args),
        transcript_dir=Path(args.transcript) if args.transcript else None,
        audit=args.audit,
        server_name=args.server_name,
        session_timeout_s=args.session_timeout,
        connect_timeout_s=args.connect_timeout,
        reconnect_timeout_s=args.reconnect_timeout,
        parallel=args.parallel,
        crash_at=None if args.crash_at is None else CrashPoint.parse(args.crash_at),
        reproducible_dp_noise=args.reproducible_dp_noise,
    )
    outcomes = run_clients(options)
    for line in stop_reasons(outcomes):
        print(line, file=sys.stderr)
    finished = sum(o.finished for o in outcomes.values())
    print(f"clients {args.ids}: {finished} of {len(outcomes)} finished the run")
    return 0 if finished == len(outcomes) else 1
