"""What both mask roles agree on about mask messages: sizes they check, and the count-lane test.

Kept apart from the roles so the server role need not import the client role.
"""

from __future__ import annotations

from secure_fedgraph.crypto import shamir

__all__ = ["COMMITMENTS_AT", "COMMITTED_BYTES", "COMMITTED_FIELDS", "DEALT_BODY_BYTES", "DEALT_HEAD_BYTES", "DEALT_RECORD_BYTES", "NONCE_BYTES", "SEALED_BYTES",
           "SEALED_SHARES_BYTES", "SHARE_COMMITMENT_BYTES", "clipped_count_is_possible"]

SEALED_SHARES_BYTES = 2 * shamir.SHARE_BYTES  # a holder's share of the mask key and of the self-mask key
SEALED_BYTES = SEALED_SHARES_BYTES + 16  # AES-256-GCM under a key that seals one envelope (keyring.seal_shares): no nonce, the tag
SHARE_COMMITMENT_BYTES = 16  # SHA-256 truncated to 128 bits (keyring.share_commitment says why that suffices)
COMMITTED_FIELDS = (SHARE_COMMITMENT_BYTES, SHARE_COMMITMENT_BYTES)  # seed-share commitment, mask-key-share commitment
COMMITTED_BYTES = sum(COMMITTED_FIELDS)
DEALT_HEAD_BYTES = 4 + 4  # a dealt record's owner and holder (uint32 each)
COMMITMENTS_AT = DEALT_HEAD_BYTES + SEALED_BYTES  # where a dealt record's commitments start: after its head and the envelope
DEALT_BODY_BYTES = SEALED_BYTES + COMMITTED_BYTES  # the envelope and its commitments: what a dealer sends up for one holder
DEALT_RECORD_BYTES = DEALT_HEAD_BYTES + DEALT_BODY_BYTES  # the head, the envelope, its commitments: what the server relays
NONCE_BYTES = 32  # a client's graph nonce


def clipped_count_is_possible(clipped: int, *, contributors: int, values: int) -> bool:
    """Every honest contributor adds at most ``values`` to the clipped-count lane: a count
    outside [0, contributors * values] means the unmasked sum is garbage (a wrong key, bit
    flips, a malicious upload), which a 64-bit random vector passes with probability ~2^-40."""
    return 0 <= clipped <= contributors * values
