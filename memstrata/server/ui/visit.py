"""Who is looking, and how a page answers: the plumbing every inspector route shares.

A route takes ``Visitor`` (the signed-in ``Visit``: the ``MemoryOS``, the ``User`` the session's
API key authenticates, the session) and returns a ``Markup`` page, which ``UIRoute`` sends as
HTML with headers that forbid caching and framing.  ``UIRoute`` also turns what a route raises
into pages, the one place that does:

* ``SignInRequired`` (no session, or its key no longer authenticates) → 303 to ``/ui``;
* ``CsrfRefused`` (a form without its session's token) → a 403 page;
* ``MemstrataError`` (the core refused) → a page with the error's status and message, the same
  refusal the SDK raises.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Annotated, Any, cast

from fastapi import Depends, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute

from memstrata.errors import MemstrataError, Unauthenticated
from memstrata.memory.system import MemoryOS
from memstrata.model import User
from memstrata.server.auth import memory_of
from memstrata.server.ui.markup import Markup, page, tag
from memstrata.server.ui.sessions import COOKIE, SIGNED_IN_S, Session, Sessions

__all__ = ["CsrfRefused", "SignInRequired", "UIRoute", "Visit", "Visitor", "html", "sessions_of"]

#: Sent with every inspector page: nothing cached, framed, or loaded from elsewhere.
HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
}


class SignInRequired(Exception):
    """The request has no signed-in session (or its key stopped authenticating)."""


class CsrfRefused(Exception):
    """A form came without the CSRF token of its session."""


@dataclass(frozen=True)
class Visit:
    """A signed-in request: the core, the user the session's key authenticates, the session."""

    memory: MemoryOS
    user: User
    session: Session

    def nav(self) -> Markup:
        """The navigation bar: who is signed in, and the sign-out form."""
        return tag(
            "nav",
            tag("a", "Cubes", href="/ui"),
            tag("a", "Tasks", href="/ui/tasks"),
            tag("span", f"signed in as {self.user.user_id}", class_="who"),
            tag(
                "form",
                self.csrf_field(),
                tag("button", "Sign out", type="submit"),
                method="post",
                action="/ui/sign-out",
                class_="inline",
            ),
        )

    def csrf_field(self) -> Markup:
        """The hidden ``csrf_token`` field every POST form carries."""
        return tag("input", type="hidden", name="csrf_token", value=self.session.csrf_token)

    def check_csrf(self, token: str | None) -> None:
        """``CsrfRefused`` unless ``token`` is this session's CSRF token."""
        if not self.session.csrf_ok(token):
            raise CsrfRefused

    def page(self, title: str, body: Markup, status: int = 200) -> HTMLResponse:
        """``body`` as a whole page with the navigation bar."""
        return html(page(title, body, nav=self.nav()), status)


def sessions_of(request: Request) -> Sessions:
    """The inspector's sessions (made by ``ui.install``)."""
    return cast(Sessions, request.app.state.ui_sessions)


def session_of(request: Request) -> Session | None:
    """The live session the request's cookie names, if any."""
    return sessions_of(request).get(request.cookies.get(COOKIE))


def visitor(request: Request) -> Visit:
    """The signed-in ``Visit``; ``SignInRequired`` without one (the session is ended when its
    key no longer authenticates: revoked, or its user deleted)."""
    session = session_of(request)
    if session is None:
        raise SignInRequired
    memory = memory_of(request)
    try:
        user = memory.authenticate(session.key)
    except Unauthenticated:
        sessions_of(request).end(session.session_id)
        raise SignInRequired from None
    if user.user_id != session.user_id:  # a key belongs to one user for good; never trust less
        sessions_of(request).end(session.session_id)
        raise SignInRequired
    return Visit(memory, user, session)


Visitor = Annotated[Visit, Depends(visitor)]


def html(markup: Markup, status: int = 200) -> HTMLResponse:
    """An HTML response with the inspector's headers."""
    return HTMLResponse(str(markup), status_code=status, headers=HEADERS)


def set_session_cookie(
    response: Response, request: Request, value: str, lasts: float = SIGNED_IN_S
) -> None:
    """Give the browser the cookie ``value`` (a session's id, or before sign-in the form nonce
    of ``sessions.FormTokens``) for ``lasts`` seconds: HttpOnly, SameSite=Strict, Secure over
    HTTPS."""
    response.set_cookie(
        COOKIE,
        value,
        max_age=int(lasts),
        path="/ui",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def refusal(status: int, message: str, hint: str | None = None) -> HTMLResponse:
    """A page saying why the request was refused (nothing else on it)."""
    body = [tag("p", message, class_="error")]
    if hint:
        body.append(tag("p", hint, class_="hint"))
    body.append(tag("p", tag("a", "Back to the inspector", href="/ui")))
    return html(page(f"Refused ({status})", tag("div", *body)), status)


class UIRoute(APIRoute):
    """A route whose refusals are pages (see the module docs)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                return await handle(request)
            except SignInRequired:
                return RedirectResponse("/ui", status_code=303, headers=HEADERS)
            except CsrfRefused:
                return refusal(403, "the form's CSRF token is missing or stale", "reload the page")
            except MemstrataError as exc:
                return refusal(exc.status, exc.message, exc.hint)

        return guarded
