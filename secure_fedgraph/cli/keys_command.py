"""``keys init`` and ``keys host``: the run's certificates and identity keys; and the check, before
a server or client starts, that the files it needs are there."""

from __future__ import annotations

import argparse
from pathlib import Path

from secure_fedgraph.cli.arguments import Repeatable, count
from secure_fedgraph.errors import ConfigError


def add_parser(commands: argparse._SubParsersAction) -> None:
    """``keys`` and its two subcommands."""
    keys = commands.add_parser("keys", help="make the run's certificates and identity keys")
    keys_commands = keys.add_subparsers(dest="keys_command", required=True, metavar="SUBCOMMAND")
    init = keys_commands.add_parser("init", help="a CA, a server certificate, and per client a certificate and Ed25519 identity key")
    init.add_argument("dir", help="folder to write into")
    init.add_argument("--clients", type=count(), required=True, help="number of clients (ids 0..N-1)")
    init.add_argument("--server-name", action=Repeatable, default=["localhost"], help="DNS name in the server certificate (repeatable; default localhost)")
    init.add_argument("--server-ip", action=Repeatable, default=["127.0.0.1"], help="IP address in the server certificate (repeatable; default 127.0.0.1)")
    init.add_argument("--hosts", type=count(), default=None, metavar="K",
                      help="also a host certificate for each of K client processes (ids split into K contiguous ranges, as the demo "
                           "starts them): a process started with exactly those --ids holds one connection for all of them")
    init.set_defaults(handler=_init, check=_check_init)
    host = keys_commands.add_parser("host", help="a host certificate for the clients one process hosts (needs ca.key)",
                                    description="Issue a host certificate naming every client id in --ids (SAN URIs), signed by the "
                                    "CA in DIR (ca.key): a `client --ids` process with exactly these ids then holds one connection for all "
                                    "of them instead of one per client. Each client keeps its own identity key and certificate.")
    host.add_argument("dir", help="the folder `keys init` made (with ca.key)")
    host.add_argument("--ids", required=True, help="client ids the process hosts: 0-249, or 0,3,5-7")
    host.set_defaults(handler=_host, check=_check_host)


def _check_init(args: argparse.Namespace) -> None:
    from secure_fedgraph.runs import preflight

    preflight.check_writable_folder("keys init DIR", args.dir)
    if args.hosts is not None and args.hosts > args.clients:
        raise ConfigError(f"--hosts {args.hosts}: more hosts than --clients {args.clients}")


def _check_host(args: argparse.Namespace) -> None:
    from secure_fedgraph.clients.ids import parse_ids

    parse_ids(args.ids)
    if not (Path(args.dir) / "ca.key").is_file():
        raise ConfigError(f"keys host {args.dir}: no ca.key there (the folder `keys init` made; the CA key signs the host certificate)")


def _init(args: argparse.Namespace) -> int:
    from secure_fedgraph.clients.ids import parse_ids
    from secure_fedgraph.crypto.pki import init_keys
    from secure_fedgraph.runs.launch import id_ranges

    hosts = {label: parse_ids(label) for label in id_ranges(args.clients, args.hosts)} if args.hosts else {}
    keys = init_keys(args.dir, clients=args.clients, server_names=tuple(args.server_name), server_ips=tuple(args.server_ip), hosts=hosts)
    with_hosts = f", and host certificates for clients {', '.join(hosts)} (hosts/)" if hosts else ""
    print(f"keys: CA, server certificate ({', '.join(args.server_name + args.server_ip)}) and {args.clients} client "
          f"certificates with Ed25519 identity keys{with_hosts} in {keys.root} (private keys mode 0600; keep ca.key off the protocol hosts)")
    return 0


def _host(args: argparse.Namespace) -> int:
    from secure_fedgraph.clients.ids import format_ids, parse_ids
    from secure_fedgraph.crypto.pki import issue_host

    ids = parse_ids(args.ids)
    path = issue_host(args.dir, label=format_ids(ids), ids=ids)
    print(f"keys: host certificate for clients {format_ids(ids)} in {path} (its key beside it, mode 0600): `client --ids {format_ids(ids)}` "
          "uses it, one connection for all of them")
    return 0


def has_host_cert(certs: str, clients: list[int]) -> bool:
    """Whether ``certs`` holds a host certificate for exactly ``clients`` (their process then holds
    one stream for all of them, else one per client)."""
    from secure_fedgraph.clients.ids import format_ids
    from secure_fedgraph.crypto.pki import KeyDirectory

    return KeyDirectory(Path(certs)).host_cert(format_ids(clients)).is_file()


def check_keys(certs: str, *, server: bool, clients: list[int]) -> None:
    """The files a server, or a client process (under its host certificate or its clients' own), needs."""
    from secure_fedgraph.clients.ids import format_ids
    from secure_fedgraph.crypto.pki import KeyDirectory
    from secure_fedgraph.runs.preflight import check_files

    keys = KeyDirectory(Path(certs))
    paths = [keys.ca, *((keys.server_cert, keys.server_key) if server else ())]
    host = not server and has_host_cert(certs, clients)
    if host:
        paths += [keys.host_key(format_ids(clients))]
    for client in clients:
        paths += [keys.client_cert(client)] if server else [*(() if host else (keys.client_cert(client), keys.client_key(client))), keys.identity_key(client)]
    check_files("--certs", paths, f"make the run's keys with `secure-fedgraph keys init {certs} --clients N`")
