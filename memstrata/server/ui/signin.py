"""Signing in and out of the inspector, and its stylesheet.

``GET /ui`` before sign-in is the form (``signin_page``): a field ``key`` (an API key) and the
hidden ``csrf_token`` of an anonymous session made for it.  ``POST /ui/sign-in`` checks the token
against that session, then the key with ``MemoryOS.authenticate`` (the REST API's rule), and
starts a new session for the key.  ``POST /ui/sign-out`` (with the token) ends it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from memstrata.errors import Unauthenticated
from memstrata.server.auth import memory_of
from memstrata.server.ui.markup import Markup, page, tag
from memstrata.server.ui.sessions import COOKIE, Session
from memstrata.server.ui.style import CSS
from memstrata.server.ui.visit import (
    HEADERS,
    CsrfRefused,
    UIRoute,
    Visitor,
    html,
    session_of,
    sessions_of,
    set_session_cookie,
)

router = APIRouter(route_class=UIRoute, include_in_schema=False)
HINT = "The key is the one the REST API takes (memstrata serve prints the first one)."


def signin_page(request: Request, error: str | None = None, status: int = 200) -> HTMLResponse:
    """The sign-in form, with the CSRF token of the browser's session (a new anonymous one when
    it has none); ``error`` says why the last try failed."""
    session = session_of(request)
    fresh = session is None
    if session is None:
        session = sessions_of(request).start()
    response = html(page("Sign in", _form(session, error)), status)
    if fresh:
        set_session_cookie(response, request, session)
    return response


def _form(session: Session, error: str | None) -> Markup:
    return tag(
        "div",
        tag("p", error, class_="error") if error else None,
        tag(
            "form",
            tag("label", "API key", for_="key"),
            tag("input", type="password", id="key", name="key", autocomplete="off", required=True),
            tag("input", type="hidden", name="csrf_token", value=session.csrf_token),
            tag("button", "Sign in", type="submit"),
            method="post",
            action="/ui/sign-in",
            class_="signin",
        ),
        tag("p", HINT, class_="hint"),
    )


@router.post("/ui/sign-in")
def sign_in(
    request: Request,
    key: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Start a session for the user ``key`` authenticates; the form again, with why, if not."""
    session = session_of(request)
    if session is None or not session.csrf_ok(csrf_token):
        raise CsrfRefused
    try:
        memory_of(request).authenticate(key)
    except Unauthenticated as exc:
        return signin_page(request, exc.message, status=401)
    sessions = sessions_of(request)
    sessions.end(session.session_id)
    response = RedirectResponse("/ui", status_code=303, headers=HEADERS)
    set_session_cookie(response, request, sessions.start(key))
    return response


@router.post("/ui/sign-out")
def sign_out(request: Request, visit: Visitor, csrf_token: Annotated[str, Form()] = "") -> Response:
    """End the session (needs its CSRF token); back to the sign-in form."""
    visit.check_csrf(csrf_token)
    sessions_of(request).end(visit.session.session_id)
    response = RedirectResponse("/ui", status_code=303, headers=HEADERS)
    response.delete_cookie(COOKIE, path="/ui", httponly=True, samesite="strict")
    return response


@router.get("/ui/style.css")
def style() -> Response:
    """The inspector's stylesheet (vendored: no CDN)."""
    return Response(CSS, media_type="text/css", headers={"Cache-Control": "max-age=3600"})
