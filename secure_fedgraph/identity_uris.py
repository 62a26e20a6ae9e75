"""How a certificate names the client ids its holder speaks for (SAN URIs), read the same way by
the PKI that writes them (crypto/pki.py) and the gRPC transport that checks a peer by them: a
leaf, so both may import it.

A client's own certificate names one id, ``urn:secure-fedgraph:client:<id>``; a host
certificate names contiguous runs, ``urn:secure-fedgraph:clients:<lo>-<hi>`` each, so it stays
a few hundred bytes whatever it hosts (one URI per id made a 677-client certificate 22 KB, and
gRPC's TLS handshake fails on client certificates from about 8 KB to 64 KB).
"""

from __future__ import annotations

from collections.abc import Iterable

URI_PREFIX = "urn:secure-fedgraph:client:"
RANGE_PREFIX = "urn:secure-fedgraph:clients:"


def uri_ranges(uris: Iterable[str]) -> list[tuple[int, int]]:
    """The id ranges (lo, hi), inclusive, that SAN URIs name; other URIs are ignored."""
    ranges = []
    for uri in uris:
        if uri.startswith(URI_PREFIX) and uri[len(URI_PREFIX) :].isdigit():
            ranges.append((int(uri[len(URI_PREFIX) :]),) * 2)
        elif uri.startswith(RANGE_PREFIX):
            lo, _, hi = uri[len(RANGE_PREFIX) :].partition("-")
            if lo.isdigit() and hi.isdigit() and int(lo) <= int(hi):
                ranges.append((int(lo), int(hi)))
    return ranges


def range_uris(runs: Iterable[tuple[int, int]]) -> list[str]:
    """The SAN URIs of a host certificate naming ``runs`` (lo, hi)."""
    return [f"{RANGE_PREFIX}{lo}-{hi}" for lo, hi in runs]
