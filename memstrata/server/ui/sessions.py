"""Sign-in sessions of the inspector, held in this server's memory, and the sign-in form's tokens.

A session is a random id (the cookie ``memstrata_ui``: HttpOnly, SameSite=Strict, path ``/ui``,
Secure over HTTPS) mapping to a CSRF token, the API key the user signed in with and that key's
user.  The key is checked again by ``MemoryOS.authenticate`` on every request (``visit``), so a
revoked key ends its sessions at once.  Signing in always starts a new session (a new id and a
new token: no fixation).

Before sign-in nothing is kept on the server (``FormTokens``): the sign-in form's CSRF token is
signed, not stored.  The browser gets a random *form nonce* in the same cookie, and the form's
token is the time it was made with an HMAC, under a secret of this process, over the nonce and
that time.  ``POST /ui/sign-in`` checks the token against the cookie it came with and its age
(at most ``FORM_S``).  A cross-site form cannot send the SameSite=Strict cookie, and a token
made for another browser's nonce does not match; and since showing the form stores nothing, no
number of anonymous visitors can crowd out a form someone is about to send.

Signed-in sessions are bounded per user: at most ``MAX_SESSIONS_PER_USER`` each (a user's new
session ends that user's own oldest, never someone else's), and ``MAX_SESSIONS`` in all (when
full, the expired ones go first, then the oldest session of the user holding the most).  Each
lasts ``SIGNED_IN_S``.  Sessions live in one process: behind a load balancer, pin a browser to
one server.  Thread-safe.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

__all__ = [
    "COOKIE",
    "FORM_S",
    "MAX_SESSIONS",
    "MAX_SESSIONS_PER_USER",
    "SIGNED_IN_S",
    "FormTokens",
    "Session",
    "Sessions",
]

COOKIE = "memstrata_ui"
#: How many signed-in sessions one server keeps at most, all users together.
MAX_SESSIONS = 10_000
#: How many signed-in sessions one user keeps at most (a new one ends the user's oldest).
MAX_SESSIONS_PER_USER = 16
#: Seconds a signed-in session lasts.
SIGNED_IN_S = 12 * 3600.0
#: Seconds a sign-in form's token stays good.
FORM_S = 3600.0
#: What a form nonce (and a session id) looks like: ``secrets.token_urlsafe(32)``.
_NONCE = re.compile(r"[A-Za-z0-9_-]{43}")


@dataclass(frozen=True)
class Session:
    """One signed-in browser: its id (the cookie), CSRF token, API key and that key's user."""

    session_id: str
    csrf_token: str
    key: str
    user_id: str
    expires: float

    def csrf_ok(self, token: str | None) -> bool:
        """Whether ``token`` (a form's ``csrf_token``) is this session's, in constant time."""
        return bool(token) and hmac.compare_digest(self.csrf_token, str(token))


class FormTokens:
    """The sign-in form's CSRF tokens: signed with a secret of this process, never stored."""

    def __init__(self) -> None:
        self._secret = secrets.token_bytes(32)

    @staticmethod
    def nonce(cookie: str | None) -> str:
        """The browser's form nonce: its cookie when that looks like one (so two tabs share it),
        else a new random one."""
        if cookie and _NONCE.fullmatch(cookie):
            return cookie
        return secrets.token_urlsafe(32)

    def issue(self, nonce: str) -> str:
        """A token for the form shown to the browser holding ``nonce``: ``<time>.<hmac>``."""
        made = str(int(time.monotonic()))
        return f"{made}.{self._mac(nonce, made)}"

    def check(self, nonce: str | None, token: str | None) -> bool:
        """Whether ``token`` was issued here for ``nonce`` less than ``FORM_S`` ago."""
        if not nonce or not token or "." not in token:
            return False
        made, mac = token.split(".", 1)
        if not (made.isascii() and made.isdigit() and len(made) <= 12):
            return False
        if not 0 <= time.monotonic() - int(made) <= FORM_S:
            return False
        return hmac.compare_digest(mac, self._mac(nonce, made))

    def _mac(self, nonce: str, made: str) -> str:
        message = f"sign-in\0{nonce}\0{made}".encode("utf-8", "surrogatepass")
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()


class Sessions:
    """The signed-in sessions of one server, by id and by user, and its form tokens."""

    def __init__(self, most: int = MAX_SESSIONS, per_user: int = MAX_SESSIONS_PER_USER) -> None:
        self.most = most
        self.per_user = per_user
        self.forms = FormTokens()
        self._by_id: dict[str, Session] = {}
        # each user's session ids, oldest first
        self._by_user: dict[str, OrderedDict[str, None]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_id)

    def get(self, session_id: str | None) -> Session | None:
        """The live session ``session_id`` names; None when unknown or expired."""
        if not session_id:
            return None
        with self._lock:
            session = self._by_id.get(session_id)
            if session is not None and session.expires < time.monotonic():
                self._drop(session_id)
                return None
            return session

    def start(self, key: str, user_id: str) -> Session:
        """A new session of ``user_id``, signed in with ``key``; it ends the user's oldest one
        when the user holds ``per_user``, and another user's only when the server is full."""
        session = Session(
            secrets.token_urlsafe(32),
            secrets.token_urlsafe(32),
            key,
            user_id,
            time.monotonic() + SIGNED_IN_S,
        )
        with self._lock:
            mine = self._by_user.get(user_id, OrderedDict())
            while len(mine) >= self.per_user:
                self._drop(next(iter(mine)))
            if len(self._by_id) >= self.most:
                self._make_room()
            self._by_id[session.session_id] = session
            self._by_user.setdefault(user_id, OrderedDict())[session.session_id] = None
        return session

    def end(self, session_id: str) -> None:
        """Forget the session (sign-out, or a key that no longer authenticates)."""
        with self._lock:
            self._drop(session_id)

    def _make_room(self) -> None:
        """Drop the expired sessions; if none was, the oldest of the user holding the most (so
        the users holding one or a few keep theirs).  Only when full: both walk the table."""
        now = time.monotonic()
        for stale in [s.session_id for s in self._by_id.values() if s.expires < now]:
            self._drop(stale)
        while len(self._by_id) >= self.most:
            busiest = max(self._by_user.values(), key=len)
            self._drop(next(iter(busiest)))

    def _drop(self, session_id: str) -> None:
        session = self._by_id.pop(session_id, None)
        if session is None:
            return
        mine = self._by_user.get(session.user_id)
        if mine is not None:
            mine.pop(session_id, None)
            if not mine:
                del self._by_user[session.user_id]
