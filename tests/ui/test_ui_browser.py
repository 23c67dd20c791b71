"""The inspector in a real browser: headless Chromium (Debian's) driven by Playwright.

Playwright's own browser download does not work offline, so the tests launch the system
``chromium`` through ``executable_path``.  Without chromium or the ``playwright`` package they
are skipped, saying which is missing; with ``MEMSTRATA_TEST_REQUIRE_SERVICES=1`` (CI) they fail.
Screenshots are kept as test artifacts: they go to ``MEMSTRATA_UI_SCREENSHOTS`` when it is set
(how the ones in docs/img are made, see docs/inspector.md), else to the folder ``inspector``
under ``MEMSTRATA_TEST_ARTIFACTS`` when that is set, else to a pytest temporary folder.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.ui.conftest import Inspector, tiered

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
    """Where the screenshots go (see the module docs)."""
    chosen = os.environ.get("MEMSTRATA_UI_SCREENSHOTS")
    artifacts = os.environ.get("MEMSTRATA_TEST_ARTIFACTS")
    if chosen:
        folder = Path(chosen)
    elif artifacts:
        folder = Path(artifacts) / "inspector"
    else:
        folder = tmp_path_factory.mktemp("screenshots")
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
    assert "score parts" in page.inner_text("thead")  # why each hit ranks where it does
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


def test_tiers_charts_time_machine_diff_audit_and_tasks(
    page: Any, inspector: Inspector, shots: Path
) -> None:
    memory, url = inspector.memory, inspector.url
    user_id, key = inspector.person("bea")
    cube_id = tiered(inspector, user_id)
    [hello] = memory.list_memories(cube_id, user_id=user_id, filters={"session_id": "s2"})
    time.sleep(1.1)  # the update is a second after: the time machine's input counts seconds
    memory.update(hello.id, user_id=user_id, text="Hello again, it is Ann from Porto")
    sign_in_with(page, url, key)
    page.click(f"a[href='/ui/cubes/{cube_id}']")
    page.wait_for_selector("svg#tiers-by-day")
    chart = page.locator("figure.chart:has(svg#tiers-by-day)")
    assert chart.locator("rect.bar").count() == 3  # one day, three tiers
    chart.screenshot(path=str(shots / "activity.png"))

    page.click("a:has-text('Tiers')")
    page.wait_for_selector("svg#heat")
    heat = page.locator("figure.chart:has(svg#heat)")
    assert heat.locator("rect.bar").count() == 1  # one segment
    heat.screenshot(path=str(shots / "heat.png"))
    page.screenshot(path=str(shots / "tiers.png"), full_page=True)

    page.click("a:has-text('Time machine')")
    first = memory.history(hello.id, user_id=user_id)[0].at  # the next whole second:
    page.fill("input[name=at]", (first + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%S"))
    page.click("button:has-text('Show')")
    page.wait_for_selector("#as-of")
    assert "Hello again" in page.inner_text("tbody")  # as it was then…
    assert "it is Ann from Porto" not in page.content()  # …before the update
    page.screenshot(path=str(shots / "time-machine.png"), full_page=True)

    page.goto(f"{url}/ui/cubes/{cube_id}/items/{hello.id}")
    page.click("button:has-text('Compare')")
    page.wait_for_selector(".diff ins")
    assert "it is Ann from Porto" in page.inner_text(".diff ins")
    page.screenshot(path=str(shots / "diff.png"), full_page=True)

    page.goto(f"{url}/ui/cubes/{cube_id}/items/{hello.id}")
    page.click("button:has-text('Move to activated')")
    page.wait_for_selector("text=Moved to activated")
    assert memory.get(hello.id, user_id=user_id).status == "activated"

    page.click("a:has-text('Audit')")
    page.select_option("select[name=op]", "transition")
    page.click("button:has-text('Show')")
    page.wait_for_url(re.compile(r"/audit\?op=transition&"))
    moves = [e for e in memory.audit(by=user_id, cube_id=cube_id) if e.op == "transition"]
    assert page.locator("tbody tr").count() == len(moves)  # the tiers' moves and ours
    assert hello.id in page.inner_text("tbody tr:first-child")  # newest first
    page.screenshot(path=str(shots / "audit.png"), full_page=True)

    page.click("nav a:has-text('Tasks')")
    page.wait_for_selector("h1:has-text('Tasks')")
    assert cube_id in page.content()  # the consolidation tasks of the cube
    page.screenshot(path=str(shots / "tasks.png"), full_page=True)
