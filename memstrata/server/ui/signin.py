"""Signing in and out of the inspector, and its stylesheet.

``GET /ui`` before sign-in is the form (``signin_page``): a field ``key`` (an API key) and the
hidden ``csrf_token``, signed for the browser's form nonce (``sessions.FormTokens``: nothing is
stored on the server for a visitor not signed in).  ``POST /ui/sign-in`` checks the token
against the nonce of the cookie it came with, then the key with ``MemoryOS.authenticate`` (the
REST API's rule), and starts a new session for the key's user.  ``POST /ui/sign-out`` (with the
session's token) ends it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from memstrata.errors import Unauthenticated
from memstrata.server.auth import memory_of
from memstrata.server.ui.markup import Markup, page, tag
from memstrata.server.ui.sessions import COOKIE, FORM_S
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
    """The sign-in form with a CSRF token signed for the browser's form nonce (a new nonce, in
    the cookie, when it has none); ``error`` says why the last try failed.  Stores nothing."""
    cookie = request.cookies.get(COOKIE)
    forms = sessions_of(request).forms
    nonce = forms.nonce(cookie)
    response = html(page("Sign in", _form(forms.issue(nonce), error)), status)
    if nonce != cookie:
        set_session_cookie(response, request, nonce, lasts=FORM_S)
    return response


def _form(csrf_token: str, error: str | None) -> Markup:
    return tag(
        "div",
        tag("p", error, class_="error") if error else None,
        tag(
            "form",
            tag("label", "API key", for_="key"),
            tag("input", type="password", id="key", name="key", autocomplete="off", required=True),
            tag("input", type="hidden", name="csrf_token", value=csrf_token),
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
    sessions = sessions_of(request)
    if not sessions.forms.check(request.cookies.get(COOKIE), csrf_token):
        raise CsrfRefused
    try:
        user = memory_of(request).authenticate(key)
    except Unauthenticated as exc:
        return signin_page(request, exc.message, status=401)
    earlier = session_of(request)
    if earlier is not None:  # signing in again from a signed-in browser: that session ends
        sessions.end(earlier.session_id)
    response = RedirectResponse("/ui", status_code=303, headers=HEADERS)
    set_session_cookie(response, request, sessions.start(key, user.user_id).session_id)
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
