"""API keys: how they are made and how they are stored.

A key is ``ms_`` followed by 43 URL-safe characters (32 random bytes).  The store keeps only its
SHA-256: a key carries 256 bits of randomness, so a fast hash is as safe as a slow one here, and
authenticating a request costs one indexed lookup.
"""

from __future__ import annotations

import hashlib
import secrets

PREFIX = "ms_"


def new_key() -> str:
    """A fresh random API key."""
    return PREFIX + secrets.token_urlsafe(32)


def key_hash(key: str) -> str:
    """What the store keeps of ``key``."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()
