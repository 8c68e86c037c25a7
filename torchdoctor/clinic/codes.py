"""Case codes: ``C-7Q2M-0K4D`` for one bug, ``P-...`` for a pair. A code holds 16 bits of the case's names and
the 20-bit run seed, shuffled by a Feistel network so that two codes of one bug share no visible part, and a
check character (it checks the prefix too for a pair) that catches most typos."""

from __future__ import annotations

import hashlib

from torchdoctor.clinic.templates import ClinicError

__all__ = ["MAX_SEED", "decode", "encode", "key_hash"]

MAX_SEED = 2**20 - 1
_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's base32: no I, L, O, U
_TYPOS = str.maketrans({"O": "0", "I": "1", "L": "1"})


def key_hash(key: str) -> int:
    """16 bits of a case's names: 'template/operator', or 'template/a+b' for a pair."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:2], "big")


def _check_bits(payload: int, prefix: str = "C") -> int:
    salt = b"" if prefix == "C" else prefix.encode()  # a pair's code checks its prefix too
    return hashlib.sha256(salt + payload.to_bytes(5, "big")).digest()[0] & 0xF


def _feistel(payload: int, decode: bool = False) -> int:
    """A reversible shuffle of the 36 bits, so that codes of the same bug share no visible part."""
    left, right = payload >> 18, payload & 0x3FFFF
    rounds = range(3, -1, -1) if decode else range(4)
    for r in rounds:
        if decode:
            left, right = right ^ _round(r, left), left
        else:
            left, right = right, left ^ _round(r, right)
    return (left << 18) | right


def _round(r: int, half: int) -> int:
    return int.from_bytes(hashlib.sha256(f"clinic/{r}/{half}".encode()).digest()[:3], "big") & 0x3FFFF


def encode(key: str, seed: int, prefix: str = "C") -> str:
    """A case's code: 'C-' for one bug, 'P-' for a pair, then the shuffled key hash and seed and a check character."""
    payload = _feistel((key_hash(key) << 20) | seed)
    number = (payload << 4) | _check_bits(payload, prefix)
    chars = "".join(_ALPHABET[(number >> shift) & 31] for shift in range(35, -1, -5))
    return f"{prefix}-{chars[:4]}-{chars[4:]}"


def decode(code: str) -> tuple[str, int, int]:
    """The prefix ('C' or 'P'), the key's hash and the seed a code holds; a clear error for a malformed code."""
    if not isinstance(code, str):
        raise ClinicError(f"a case code is a string like 'C-7Q2M-0K4D', not {type(code).__name__}")
    text = code.strip().upper().translate(_TYPOS)
    if text[:2] not in ("C-", "P-"):
        raise ClinicError(f"{code!r} is not a case code: a case code looks like 'C-7Q2M-0K4D' (C, or P for two bugs, "
                          "a dash, 8 letters and digits)")
    prefix, body = text[0], text[2:].replace("-", "").replace(" ", "")
    bad = sorted(set(body) - set(_ALPHABET))
    if len(body) != 8 or bad:
        why = f"it has the characters {''.join(bad)!r}, which no code uses" if bad else f"it has {len(body)}"
        raise ClinicError(f"{code!r} is not a case code: after '{prefix}-' come 8 letters and digits; {why}")
    number = 0
    for ch in body:
        number = number * 32 + _ALPHABET.index(ch)
    payload, check = number >> 4, number & 0xF
    if _check_bits(payload, prefix) != check:
        raise ClinicError(f"{code!r} is not a valid case code (its check character does not match): a character "
                          "was probably mistyped; copy the code again")
    payload = _feistel(payload, decode=True)
    return prefix, payload >> 20, payload & MAX_SEED
