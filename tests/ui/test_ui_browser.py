"""The inspector in a real browser: headless Chromium (Debian's) driven by Playwright.

Playwright's own browser download does not work offline, so the tests launch the system
``chromium`` through ``executable_path``.  Without chromium or the ``playwright`` package they
are skipped, saying which is missing; with ``MEMSTRATA_TEST_REQUIRE_SERVICES=1`` (CI) they fail.
Screenshots go to ``MEMSTRATA_UI_SCREENSHOTS`` (default: a pytest temporary folder); the ones in
docs/img come from a run with that variable set (see docs/inspector.md).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ui.conftest import Inspector

CHROMIUM = ("chromium", "chromium-browser")


def chromium_path() -> str:
    """The system Chromium; skips (or fails in CI) when it or Playwright is missing."""
    found = next((p for p in map(shutil.which, CHROMIUM) if p), None)
    problems = []
    if found is None:
        problems.append("no chromium executable on PATH (apt-get install chromium)")
    if importlib.util.find_spec("playwright") is None:
        problems.append("the playwright package is not installed (pip install playwright)")
    if problems:
        message = "cannot run the browser tests: " + "; ".join(problems)
        if os.environ.get("MEMSTRATA_TEST_REQUIRE_SERVICES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    assert found is not None
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium (one per module)."""
    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go."""
    chosen = os.environ.get("MEMSTRATA_UI_SCREENSHOTS")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    yield context.new_page()
    context.close()


def people_and_cube(inspector: Inspector) -> tuple[str, str, str, list[str]]:
    """A user owning a cube with a small conversation: (user id, key, cube id, item ids)."""
    memory = inspector.memory
    user_id, key = inspector.person("ann")
    cube_id = memory.create_cube("Ann's notes", owner=user_id).cube_id
    lines = [
        "I moved to Porto last spring.",
        "My cat is called Miso; she is a grey tabby.",
        "I work as a nurse at the Santo António hospital.",
        "On weekends I surf at Matosinhos beach.",
        "My sister Joana visits every December.",
    ]
    messages = [{"role": "user", "name": "Ann", "content": line} for line in lines]
    ids = memory.add(messages, user_id=user_id, cube_id=cube_id, session_id="chat-1")
    memory.update(ids[1], user_id=user_id, text="My cat is called Miso; she is a black cat.")
    return user_id, key, cube_id, ids


def sign_in_with(page: Any, url: str, key: str) -> None:
    page.goto(f"{url}/ui")
    page.fill("input[name=key]", key)
    page.click("button:has-text('Sign in')")


def test_a_tour_of_the_inspector(page: Any, inspector: Inspector, shots: Path) -> None:
    user_id, key, cube_id, ids = people_and_cube(inspector)
    memory, url = inspector.memory, inspector.url
    page.goto(f"{url}/ui")
    assert page.locator("input[name=csrf_token]").count() == 1
    page.screenshot(path=str(shots / "sign-in.png"))
    sign_in_with(page, url, key)
    page.wait_for_selector(f"a[href='/ui/cubes/{cube_id}']")
    page.screenshot(path=str(shots / "cubes.png"), full_page=True)

    page.click(f"a[href='/ui/cubes/{cube_id}']")
    page.wait_for_selector("text=Matosinhos")
    page.screenshot(path=str(shots / "cube.png"), full_page=True)

    page.fill("input[name=q]", "what is the cat called?")
    page.click("button:has-text('Show')")
    page.wait_for_selector("h2:has-text('Search')")
    assert "Miso" in page.inner_text("tbody")
    page.screenshot(path=str(shots / "search.png"), full_page=True)

    page.click("a:has-text('My cat is called Miso')")
    page.wait_for_selector("h2:has-text('Versions')")
    page.screenshot(path=str(shots / "item.png"), full_page=True)
    page.click("button:has-text('Roll back to 1')")
    page.wait_for_selector("text=Rolled back to version 1")
    restored = memory.get(ids[1], user_id=user_id)
    assert (restored.text, restored.version) == ("My cat is called Miso; she is a grey tabby.", 3)

    page.click("a:has-text('Erase for good')")
    page.wait_for_selector("text=cannot be undone")
    page.screenshot(path=str(shots / "erase-confirm.png"), full_page=True)
    page.click("button:has-text('Yes, erase for good')")
    page.wait_for_selector("text=Erased 1 item(s) for good.")
    assert "Miso" not in page.content()
    assert (
        memory.get(ids[1], user_id=user_id).text,
        memory.get(ids[1], user_id=user_id).status,
    ) == ("", "deleted")

    page.click("a:has-text('Context preview')")
    page.fill("input[name=q]", "where does Ann live and work?")
    page.click("button:has-text('Pack')")
    page.wait_for_selector("pre.context")
    assert "Porto" in page.inner_text("pre.context")
    page.screenshot(path=str(shots / "context.png"), full_page=True)


def test_another_users_cube_is_refused_in_the_browser(
    page: Any, inspector: Inspector, shots: Path
) -> None:
    _, _, cube_id, ids = people_and_cube(inspector)
    _, stranger_key = inspector.person("stranger")
    sign_in_with(page, inspector.url, stranger_key)
    page.wait_for_selector("text=Sign out")
    assert cube_id not in page.content()
    for path in (f"/ui/cubes/{cube_id}", f"/ui/cubes/{cube_id}/items/{ids[0]}"):
        response = page.goto(f"{inspector.url}{path}")
        assert response.status in (403, 404)
        assert "Porto" not in page.content()
    page.screenshot(path=str(shots / "refused.png"), full_page=True)
