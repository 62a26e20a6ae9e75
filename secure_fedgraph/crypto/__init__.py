"""Cryptographic primitives, one per module, thin over ``cryptography`` and TenSEAL.

* :mod:`.labels`      canonical byte encodings and the one HKDF ``info`` function
* :mod:`.prg`         AES-256-CTR keystream as uniform ring elements (the mask PRG)
* :mod:`.keys`        Ed25519 identity keys, X25519 round keys, HKDF key derivation
* :mod:`.envelope`    AES-GCM sealing of a payload to one peer
* :mod:`.shamir`      Shamir secret sharing of 32-byte secrets, in 24-bit limbs over GF(2^26 - 5)
* :mod:`.fixed_point` clipping and fixed-point encoding into Z_2^32 / Z_2^64
* :mod:`.ckks`        TenSEAL CKKS parameters, contexts and chunked vectors
"""
