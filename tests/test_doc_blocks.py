"""Every shell and Python block of README.md and docs/**/*.md, run as printed (issue 28 §4).

Each ``sh``/``bash``/``python`` block is one test, with the id ``page:line`` of its opening
fence. A block runs the way a new user would run it:

- in a **fresh temporary directory** (the working directory), with a ``.venv`` there that is
  this interpreter's virtual environment (so ``.venv/bin/memstrata`` works as printed) and its
  ``bin`` first on ``PATH`` (so plain ``memstrata`` and ``python3`` are that environment's too);
- in a **clean environment**: none of this machine's ``MEMSTRATA_*`` variables, ``HOME`` a
  fresh directory (the default database and caches land there, not in the real home);
- shell with ``bash -euo pipefail``, so any failing command fails the block; Python as a script.

A one-line HTML comment right before the opening fence (indented like it) changes that:
``<!-- doc-test: WORD … [(reason)] -->``. The words:

``server``
    The block runs while ``memstrata serve --db ./memstrata.db`` runs on port 8765 with
    ``MEMSTRATA_ADMIN_KEY=quickstart-admin-key``: the README's quickstart server, which every
    page's examples address. The ``server`` blocks of one page are one terminal session: one
    directory, one server, in page order, the shell variables a block sets (``KEY=…``) seen by
    the next blocks, and its exported ones by the Python blocks. Every request a block makes
    must be answered below 400 (read from the server's access log), and none is a 5xx. A port
    8765 that stays taken fails the test saying so.
``twice``
    The block runs a second time in the same directory and must succeed again: a first run that
    works, twice (the README's examples are marked so).
``install (why)`` · ``data (why)`` · ``fragment (why)`` · ``skip (why)``
    The block is not run: it creates a virtual environment and installs (CI runs those
    commands itself: ``.ci/run``), needs data outside the repository or hours of run time,
    is a piece of a program rather than one, or cannot run here for the reason given (Docker,
    a long-running server, your own database host). The reason is required. Such a block is
    still checked: Python must compile (top-level ``await`` allowed), shell must parse
    (``bash -n``); then the test is reported as skipped with its reason (``-ra`` lists them), so
    nothing is passed over silently. ``test_the_census_of_doc_blocks`` prints the counts.

A block with no language (or ``text``) whose first line is a command (``memstrata …``,
``curl …``, ``import …``) fails ``test_every_marker_is_well_formed``: tag it, then run or mark
it. Other languages (``json``, ``toml``) are data and are not run.
"""

from __future__ import annotations

import ast
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.doc_blocks import SHELL, Block, blocks, marker_errors, runnable
from tests.serving import Served, wait_healthy

PORT = 8765
ADMIN_KEY = "quickstart-admin-key"
SERVE = ("serve", "--db", "./memstrata.db")
#: a guard against a hung block, not a measure of speed: the slowest block takes seconds
BLOCK_TIMEOUT_S = 600
PORT_WAIT_S = 120.0
VENV = Path(sys.prefix)
#: the blocks run when this test was written: marking more of them is a choice to make here
MIN_RUN = 13
BLOCKS = runnable()

#: a shell block's variables, kept for the page's next blocks (bash's own are left out)
_SAVE_VARIABLES = r"""
__doc_base=" $(compgen -v | tr '\n' ' ') "
if [ -f "$__DOC_STATE" ]; then source "$__DOC_STATE"; fi
__doc_save() {
    for __doc_v in $(compgen -v); do
        case "$__doc_base" in *" $__doc_v "*) continue ;; esac
        case "$__doc_v" in __doc*|BASH*|PIPESTATUS|FUNCNAME|_) continue ;; esac
        declare -p "$__doc_v"
    done > "$__DOC_STATE"
}
trap __doc_save EXIT
"""


def _environment(home: Path) -> dict[str, str]:
    """This process's environment less every ``MEMSTRATA_*`` and ``XDG_*`` variable, with the
    virtual environment's ``bin`` first on ``PATH`` and ``HOME`` at ``home``."""
    kept = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MEMSTRATA_", "XDG_", "VIRTUAL_ENV", "PYTEST_"))
    }
    path = f"{VENV / 'bin'}{os.pathsep}{kept.get('PATH', os.defpath)}"
    return {**kept, "PATH": path, "HOME": str(home)}


class Session:
    """A directory blocks run in (a fresh one per block, or a page's, shared by its ``server``
    blocks), the environment they get, and the shell variables they leave."""

    def __init__(self, root: Path) -> None:
        self.cwd = root / "work"
        self.cwd.mkdir(parents=True)
        (self.cwd / ".venv").symlink_to(VENV, target_is_directory=True)
        (root / "home").mkdir()
        self.env = _environment(root / "home")
        self.state = root / "variables.sh"
        self.scripts = root / "scripts"
        self.scripts.mkdir()

    def run(self, block: Block) -> None:
        """Run ``block`` here once; fail with its output when it exits non-zero."""
        script = self.scripts / f"{block.line}.{'py' if block.lang == 'python' else 'sh'}"
        script.write_text(block.code, encoding="utf-8")
        if block.lang in SHELL:
            wrapped = f'{_SAVE_VARIABLES}\nsource "{script}"\n'
            command = ["bash", "-euo", "pipefail", "-c", wrapped]
        else:  # the page's exported variables, then the script as a new user runs it
            sourced = f'if [ -f "{self.state}" ]; then source "{self.state}"; fi'
            command = ["bash", "-c", f'{sourced}\nexec python "{script}"']
        env = {**self.env, "__DOC_STATE": str(self.state)}
        done = subprocess.run(
            command, cwd=self.cwd, env=env, capture_output=True, timeout=BLOCK_TIMEOUT_S
        )
        output = (done.stdout + done.stderr).decode(errors="replace")
        assert done.returncode == 0, f"{block.id} exited {done.returncode}:\n{output}"


class PageServer:
    """The page session's ``memstrata serve``, and what its access log said since a mark."""

    def __init__(self, session: Session, log: Path) -> None:
        _wait_for_free_port()
        env = {**session.env, "MEMSTRATA_ADMIN_KEY": ADMIN_KEY}
        with log.open("ab") as out:
            process = subprocess.Popen(
                [str(VENV / "bin" / "memstrata"), *SERVE],
                cwd=session.cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        self.log = log
        self.served = Served(process, f"http://127.0.0.1:{PORT}", {})
        try:
            wait_healthy(self.served, log)
        except BaseException:
            self.stop()
            raise

    def mark(self) -> int:
        return self.log.stat().st_size

    def refused_since(self, mark: int) -> list[str]:
        """The access-log lines since ``mark`` whose status is 400 or more."""
        with self.log.open("rb") as log:
            log.seek(mark)
            text = log.read().decode(errors="replace")
        return [ln for ln in text.splitlines() if re.search(r'HTTP/[\d.]+" [45]\d\d ', ln)]

    def stop(self) -> None:
        process = self.served.process
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _port_taken() -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", PORT))
        except OSError:
            return True
    return False


def _wait_for_free_port() -> None:
    deadline = time.monotonic() + PORT_WAIT_S
    while _port_taken():
        assert time.monotonic() < deadline, (
            f"port {PORT} stayed taken for {PORT_WAIT_S:.0f} s: the docs' examples address "
            f"http://127.0.0.1:{PORT}; stop what listens there and run again"
        )
        time.sleep(1)


class Sessions:
    """The page sessions of the module: at most one server at a time (they share port 8765)."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self.factory = factory
        self.pages: dict[str, tuple[Session, PageServer]] = {}
        self.done: set[str] = set()

    def fresh(self, block: Block) -> Session:
        return Session(self.factory.mktemp(_slug(block.id)))

    def page(self, block: Block) -> tuple[Session, PageServer]:
        """The page's session and server, started (after stopping another page's) if need be."""
        if block.page not in self.pages:
            self.close()
            root = self.factory.mktemp(_slug(block.page))
            session = Session(root)
            self.pages[block.page] = (session, PageServer(session, root / "serve.log"))
        return self.pages[block.page]

    def run_on_server(self, block: Block) -> None:
        """Run the page's earlier ``server`` blocks not run yet (a block selected alone still
        finds what they made), then ``block``, checking each one's requests."""
        session, server = self.page(block)
        earlier = [b for b in BLOCKS if b.page == block.page and b.server and b.line < block.line]
        for needed in [b for b in earlier if b.id not in self.done and b.runs]:
            self._run_checked(needed, session, server)
        for _ in range(block.runs):
            self._run_checked(block, session, server)

    def _run_checked(self, block: Block, session: Session, server: PageServer) -> None:
        mark = server.mark()
        session.run(block)
        self.done.add(block.id)
        assert server.served.process.poll() is None, server.log.read_text(errors="replace")
        refused = server.refused_since(mark)
        assert refused == [], f"{block.id}: requests the server refused:\n" + "\n".join(refused)

    def close(self) -> None:
        for _, server in self.pages.values():
            server.stop()
        self.pages.clear()


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text)[:40]


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sessions]:
    made = Sessions(tmp_path_factory)
    try:
        yield made
    finally:
        made.close()


def _check_syntax(block: Block) -> None:
    """A block that is not run still parses: Python compiles, shell passes ``bash -n``."""
    if block.lang == "python":
        compile(block.code, block.id, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    else:
        parsed = subprocess.run(["bash", "-n", "-c", block.code], capture_output=True, text=True)
        assert parsed.returncode == 0, f"{block.id}: {parsed.stderr}"


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_doc_block_runs_as_printed(block: Block, sessions: Sessions) -> None:
    """Issue 28 §4: every shell and Python block of the README and docs/ runs as printed in a
    fresh directory (see the module docstring for the markers); a marked one is checked for
    syntax and reported as skipped with its reason."""
    if block.not_run:
        _check_syntax(block)
        pytest.skip(f"{block.id}: {block.not_run}: {block.reason}")
    if block.server:
        sessions.run_on_server(block)
        return
    session = sessions.fresh(block)
    for _ in range(block.runs):
        session.run(block)


def test_every_marker_is_well_formed() -> None:
    """Issue 28 §4: a marker's words are known, a block that is not run says why, and no block
    that looks like a command hides from the runner without a language tag."""
    errors = [error for block in blocks() for error in marker_errors(block)]
    assert errors == []


def test_the_census_of_doc_blocks(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 28 §4: how many blocks run and how many are marked, by reason, printed on the
    terminal (so a skipped block is always counted); the README's examples run twice."""
    marked = Counter(b.not_run for b in BLOCKS if b.not_run)
    ran = [b for b in BLOCKS if not b.not_run]
    lines = [
        f"doc blocks: {len(BLOCKS)} shell and Python blocks; {len(ran)} run "
        f"({sum(b.server for b in ran)} with a server, {sum(b.runs == 2 for b in ran)} twice); "
        f"{sum(marked.values())} marked: "
        + ", ".join(f"{word} {count}" for word, count in sorted(marked.items())),
        *(f"  not run: {b.id} [{b.not_run}] {b.reason}" for b in BLOCKS if b.not_run),
    ]
    with capsys.disabled():  # on the terminal even when the test passes
        print("\n" + "\n".join(lines))
    readme = [b for b in BLOCKS if b.page == "README.md" and not b.not_run and not b.server]
    assert {b.lang for b in readme} == {"sh", "python"}
    assert all(b.runs == 2 for b in readme), "the README's examples must work run twice"
    assert len(ran) >= MIN_RUN, "\n".join(lines)
