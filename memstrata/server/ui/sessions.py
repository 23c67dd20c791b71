"""Sign-in sessions of the inspector, held in this server's memory.

A session is a random id (the cookie ``memstrata_ui``: HttpOnly, SameSite=Strict, path ``/ui``,
Secure over HTTPS) mapping to a CSRF token and, once signed in, the API key the user signed in
with.  The key is checked again by ``MemoryOS.authenticate`` on every request (``pages``), so a
revoked key ends its sessions at once.  A session is made before sign-in too (anonymous), so the
sign-in form carries a CSRF token tied to it; signing in replaces it by a new one (a new id and
a new token: no fixation).

Sessions live in one process: behind a load balancer, pin a browser to one server.  At most
``MAX_SESSIONS`` signed-in and ``MAX_ANONYMOUS`` anonymous ones are kept, apart (the oldest of
each go first), so that showing the sign-in form many times never signs anyone out; each lasts
``SIGNED_IN_S`` (signed in) or ``ANONYMOUS_S`` (not yet).  Thread-safe.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["COOKIE", "Session", "Sessions"]

COOKIE = "memstrata_ui"
#: How many sessions one server keeps at most (the oldest go first).
MAX_SESSIONS = 10_000
#: How many sessions not signed in yet (a sign-in form shown) one server keeps at most.
MAX_ANONYMOUS = 1_000
#: Seconds a signed-in session lasts, and one not signed in yet.
SIGNED_IN_S = 12 * 3600.0
ANONYMOUS_S = 3600.0


@dataclass(frozen=True)
class Session:
    """One browser's session: its id (the cookie), CSRF token, API key (None before sign-in)."""

    session_id: str
    csrf_token: str
    key: str | None
    expires: float

    def csrf_ok(self, token: str | None) -> bool:
        """Whether ``token`` (a form's ``csrf_token``) is this session's, in constant time."""
        return bool(token) and hmac.compare_digest(self.csrf_token, str(token))


class Sessions:
    """The sessions of one server, by id."""

    def __init__(self) -> None:
        self._by_id: OrderedDict[str, Session] = OrderedDict()
        self._anonymous: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session_id: str | None) -> Session | None:
        """The live session ``session_id`` names; None when unknown or expired."""
        if not session_id:
            return None
        with self._lock:
            for held in (self._by_id, self._anonymous):
                session = held.get(session_id)
                if session is not None:
                    if session.expires < time.monotonic():
                        del held[session_id]
                        return None
                    return session
            return None

    def start(self, key: str | None = None) -> Session:
        """A new session, signed in with ``key`` when given."""
        lasts = ANONYMOUS_S if key is None else SIGNED_IN_S
        session = Session(
            secrets.token_urlsafe(32), secrets.token_urlsafe(32), key, time.monotonic() + lasts
        )
        held, most = (
            (self._anonymous, MAX_ANONYMOUS) if key is None else (self._by_id, MAX_SESSIONS)
        )
        with self._lock:
            held[session.session_id] = session
            while len(held) > most:
                held.popitem(last=False)
        return session

    def end(self, session_id: str) -> None:
        """Forget the session (sign-out, or a key that no longer authenticates)."""
        with self._lock:
            self._by_id.pop(session_id, None)
            self._anonymous.pop(session_id, None)
