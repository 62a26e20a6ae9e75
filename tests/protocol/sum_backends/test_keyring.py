"""What each signature, envelope and commitment of the key set-up binds (protocol/sum_backends/keyring.py),
one field at a time: a field left out of a statement, an AAD or a digest is a field the server can
change unseen, so each has a test that fails without it (`make mutate`). The attacks that exploit
a missing binding, run end to end, are in test_attacks.py and test_mask_security.py."""

from __future__ import annotations

import dataclasses
import os

import pytest

from secure_fedgraph.crypto.keys import IdentityKey, RoundKeys
from secure_fedgraph.crypto.labels import Purpose
from secure_fedgraph.errors import ProtocolError
from secure_fedgraph.protocol.sum_backends import keyring
from secure_fedgraph.protocol.sum_backends.keyring import (
    consistency_statement,
    envelope_key,
    graph_commitment,
    keys_hash,
    open_from,
    open_shares,
    pair_key,
    pair_seed,
    seal_for,
    seal_shares,
    seed_commitment,
    self_mask_commitment,
    self_mask_key,
    share_commitment,
    sign_keys,
    verify_keys,
    view_digest,
)

LAB = {"session": b"s" * 16, "round": 3, "epoch": 1}
OTHER_LAB = [{"session": b"t" * 16}, {"round": 4}, {"epoch": 2}]


def _distinct(values) -> bool:
    values = list(values)
    return len(set(values)) == len(values)


@pytest.fixture(scope="module")
def signed():
    identity = IdentityKey.generate()
    keys = RoundKeys.generate()
    advert = sign_keys(identity, **LAB, client=5, share_public=keys.share_public, mask_public=keys.mask_public,
                       seed_commitment=os.urandom(32))
    return advert, {5: identity.public_bytes, 6: IdentityKey.generate().public_bytes}


def test_signed_keys_verify_as_advertised(signed):
    advert, directory = signed
    verify_keys(advert, directory=directory, **LAB)


@pytest.mark.parametrize("field", ["client", "share_public", "mask_public", "seed_commitment"])
def test_every_advertised_key_is_under_the_signature(signed, field):
    """A server that swaps one key of a client's advertisement (its share key, to read the shares
    sealed to it; its mask key; its seed commitment) or moves the advertisement to another client
    breaks the signature."""
    advert, directory = signed
    change = {"client": 6, "share_public": RoundKeys.generate().share_public, "mask_public": RoundKeys.generate().mask_public,
              "seed_commitment": os.urandom(32)}[field]
    with pytest.raises(ProtocolError, match="do not carry its signature"):
        verify_keys(dataclasses.replace(advert, **{field: change}), directory=directory, **LAB)


@pytest.mark.parametrize("other", OTHER_LAB, ids=lambda d: next(iter(d)))
def test_an_advertisement_verifies_in_its_own_session_round_and_epoch_only(signed, other):
    advert, directory = signed
    with pytest.raises(ProtocolError, match="do not carry its signature"):
        verify_keys(advert, directory=directory, **{**LAB, **other})


def test_keys_of_a_client_outside_the_directory_are_refused(signed):
    advert, _ = signed
    with pytest.raises(ProtocolError, match="unknown client 5"):
        verify_keys(advert, directory={}, **LAB)


def test_pair_keys_are_symmetric_and_bound_to_purpose_and_pair():
    a, b = RoundKeys.generate(), RoundKeys.generate()
    ab = pair_key(a.share, b.share_public, purpose=Purpose.SHARE_ENCRYPTION, **LAB, a=1, b=2)
    assert ab == pair_key(b.share, a.share_public, purpose=Purpose.SHARE_ENCRYPTION, **LAB, a=2, b=1)
    others = [pair_key(a.share, b.share_public, purpose=Purpose.PAIRWISE_MASK, **LAB, a=1, b=2),
              pair_key(a.share, b.share_public, purpose=Purpose.SHARE_ENCRYPTION, **LAB, a=1, b=3),
              pair_key(a.share, b.share_public, purpose=Purpose.SHARE_ENCRYPTION, **LAB, a=0, b=2)]  # each end of the pair counts
    others += [pair_key(a.share, b.share_public, purpose=Purpose.SHARE_ENCRYPTION, **{**LAB, **o}, a=1, b=2) for o in OTHER_LAB]
    assert _distinct([ab, *others])


def test_a_key_agreement_with_a_malformed_public_key_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="key agreement between clients 1 and 2 failed"):
        pair_key(RoundKeys.generate().share, b"\0" * 31, purpose=Purpose.SHARE_ENCRYPTION, **LAB, a=2, b=1)


ENVELOPE = {"aad_purpose": Purpose.CKKS_KEY_AAD, **LAB, "view": b"v" * 32}


@pytest.mark.parametrize(
    "change",
    [{"aad_purpose": Purpose.CKKS_CONTEXT_AAD},
     *OTHER_LAB, {"view": b"w" * 32}, {"owner": 9}, {"holder": 9}],
    ids=lambda d: next(iter(d)),
)
def test_an_envelope_opens_only_where_it_was_sealed(change):
    """The AAD binds purpose, session, round, epoch, dealer, holder and the dealer's view: a
    holder shown another view of the epoch (or an envelope moved to another pair) cannot open it."""
    key = os.urandom(32)
    sealed = seal_for(key, b"shares", **ENVELOPE, owner=1, holder=2)
    assert open_from(key, sealed, **ENVELOPE) == b"shares"
    pair = {k: v for k, v in change.items() if k in ("owner", "holder")}
    label = {k: v for k, v in change.items() if k not in pair}
    moved = dataclasses.replace(sealed, **pair)
    with pytest.raises(ProtocolError, match="fails authentication"):
        open_from(key, moved, **{**ENVELOPE, **label})


def test_every_statement_and_commitment_changes_with_each_of_its_fields():
    """Each argument of each statement, digest and commitment changes its value: two clients (or
    a client and the server) that differ in any of them cannot be shown the same bytes."""
    key, seed = os.urandom(32), os.urandom(32)
    consistency = {**LAB, "view": b"v" * 32, "sum_index": 0, "live": (1, 2, 3), "survivors": (1, 2)}
    view = {**LAB, "participants": (1, 2, 3), "members": (1, 2), "keys": (b"k" * 32, b"l" * 32), "commitments": (b"c",), "nonces": (b"n",)}
    pair = {**LAB, "owner": 1, "holder": 2}
    cases = {
        "consistency statement": (consistency_statement, consistency, {"view": b"w" * 32, "sum_index": 1, "live": (1, 2, 4), "survivors": (1, 3)}),
        "view digest": (view_digest, view, {"participants": (1, 2, 4), "members": (1, 3), "keys": (b"k" * 32, b"m" * 32), "commitments": (b"d",),
                                            "nonces": (b"o",)}),
        "envelope key": (lambda **kw: envelope_key(key, **kw), pair, {"owner": 3, "holder": 3}),
        "share commitment": (lambda **kw: share_commitment(b"share", **kw), {**pair, "kind": "seed"}, {"kind": "mask_key", "owner": 3, "holder": 3}),
        "seed commitment": (lambda **kw: seed_commitment(seed, **kw), {**LAB, "client": 1}, {"client": 2}),
        "self-mask key": (lambda **kw: self_mask_key(seed, **kw), {**LAB, "sum_index": 0}, {"sum_index": 1}),
        "pair seed": (lambda **kw: pair_seed(key, **kw), {**LAB, "sum_index": 0, "a": 1, "b": 2}, {"sum_index": 1, "a": 3, "b": 3}),
        "self-mask commitment": (lambda **kw: self_mask_commitment(key, **kw), {**LAB, "sum_index": 0, "client": 1}, {"sum_index": 1, "client": 2}),
        "graph commitment": (lambda **kw: graph_commitment(b"n" * 32, b"k" * 32, **kw), {**LAB, "client": 1}, {"client": 2}),
        "pair seed leaves": (lambda **kw: b"".join(keyring.pair_seed_leaves({2: key, 5: seed}, **kw)), {**LAB, "sum_index": 0, "owner": 1},
                             {"sum_index": 1, "owner": 3}),
    }
    for name, (make, base, changes) in cases.items():
        variants = [make(**{**base, field: value}) for field, value in changes.items()]
        variants += [make(**{**base, **other}) for other in OTHER_LAB]
        assert _distinct([make(**base), *variants]), name
    assert _distinct([share_commitment(b"share", **pair, kind="seed"), share_commitment(b"other", **pair, kind="seed")])
    assert _distinct([envelope_key(key, **pair), envelope_key(seed, **pair)])  # it comes from the pair key
    assert _distinct([seed_commitment(seed, **LAB, client=1), seed_commitment(bytes(32), **LAB, client=1)])  # it commits to the seed
    assert pair_seed(key, **LAB, sum_index=0, a=1, b=2) == pair_seed(key, **LAB, sum_index=0, a=2, b=1)  # both ends derive it
    assert _distinct([pair_seed(key, **LAB, sum_index=0, a=1, b=2), pair_seed(seed, **LAB, sum_index=0, a=1, b=2)])
    assert _distinct([graph_commitment(b"n" * 32, b"k" * 32, **LAB, client=1), graph_commitment(b"o" * 32, b"k" * 32, **LAB, client=1),
                      graph_commitment(b"n" * 32, b"j" * 32, **LAB, client=1)])
    leaf = lambda seeds: keyring.pair_seed_leaves(seeds, **LAB, sum_index=0, owner=1)  # noqa: E731
    assert _distinct([*leaf({2: key}), *leaf({3: key}), *leaf({2: seed})])  # a leaf names the peer whose seed it commits to


def test_a_keys_hash_covers_every_key_and_the_client():
    advert = keyring.SignedKeys(1, b"a" * 32, b"b" * 32, b"c" * 32, b"sig")
    variants = [dataclasses.replace(advert, **{f: v}) for f, v in (("client", 2), ("share_public", b"x" * 32), ("mask_public", b"x" * 32),
                                                                      ("seed_commitment", b"x" * 32))]
    assert _distinct([keys_hash(advert), *map(keys_hash, variants)])
    assert keys_hash(advert) == keys_hash(dataclasses.replace(advert, signature=b"other"))  # the signature is not a key


# --- share envelopes (keyring.seal_shares) ------------------------------------------------------


def test_the_envelope_key_is_rfc_5869_expand_of_the_pair_key():
    """The envelope key is HKDF-Expand (RFC 5869) as `cryptography` computes it, written with
    OpenSSL's HMAC directly for speed: the same bytes."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

    from secure_fedgraph.crypto.labels import label

    pair = os.urandom(32)
    assert envelope_key(pair, **LAB, owner=1, holder=2) == HKDFExpand(hashes.SHA256(), 32, label(Purpose.ENVELOPE_KEY, *LAB.values(), 1, 2)).derive(pair)


SHARES = {"seed_hash": b"a" * 16, "key_hash": b"b" * 16, **LAB, "view": b"v" * 32}


def test_each_direction_of_a_pair_seals_under_its_own_key():
    """Both clients of a pair hold one pair key, and each seals shares to the other with a nonce
    of zero: the envelope key names the direction, so the two envelopes never share a keystream
    (which would give the XOR of the two clients' shares to anyone holding both), and a complaint
    about one reveals nothing of the other."""
    pair, shares = os.urandom(32), os.urandom(72)
    forward = envelope_key(pair, **LAB, owner=1, holder=2)
    backward = envelope_key(pair, **LAB, owner=2, holder=1)
    assert forward != backward
    there = seal_shares(forward, shares, **SHARES, owner=1, holder=2)
    back = seal_shares(backward, shares, **SHARES, owner=2, holder=1)
    assert there.data[:72] != back.data[:72]
    assert open_shares(forward, there, **SHARES) == shares == open_shares(backward, back, **SHARES)
    assert open_shares(forward, dataclasses.replace(back, owner=1, holder=2), **SHARES) is None


@pytest.mark.parametrize("change", [{"seed_hash": b"x" * 16}, {"key_hash": b"x" * 16}, {"view": b"w" * 32}, *OTHER_LAB, {"owner": 3},
                                    {"holder": 3}, {"key": "another"}, {"data": "a bit flipped"}], ids=lambda d: next(iter(d)))
def test_a_share_envelope_opens_only_as_it_was_sealed(change):
    """An envelope is 72 bytes of shares and a 16-byte GCM tag, and opens under its key with the
    commitments, view, pair and key epoch it was sealed with; any other, or any bit of it changed,
    and it does not (so a holder and the server see whether a record is the one the dealer sealed)."""
    key, shares = os.urandom(32), os.urandom(72)
    sealed = seal_shares(key, shares, **SHARES, owner=1, holder=2)
    assert len(sealed.data) == 72 + 16 and open_shares(key, sealed, **SHARES) == shares
    fields = {k: v for k, v in change.items() if k in SHARES}
    moved = dataclasses.replace(sealed, **{k: v for k, v in change.items() if k in ("owner", "holder")})
    if "data" in change:
        moved = dataclasses.replace(sealed, data=bytes([sealed.data[0] ^ 1]) + sealed.data[1:])
    assert open_shares(os.urandom(32) if "key" in change else key, moved, **{**SHARES, **fields}) is None


def test_share_commitments_are_128_bits():
    assert len(share_commitment(b"share", **LAB, kind="seed", owner=1, holder=2)) == keyring.SHARE_COMMITMENT_BYTES == 16
