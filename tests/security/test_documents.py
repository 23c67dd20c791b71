"""Replays of the document attacks of issue 24 (findings 1, 2, 8 and 9).

Reading a document is bounded while it is done (JSON lines, PDF pages, page content and CPU time
are counted as they are made), its text passes the rule of every stored text, one user runs at
most ``limits.MAX_HEAVY_CALLS`` uploads and large adds at once, and a database failure never shows
a client where the database is.  The work done is measured by counts (pages read, form XObjects
entered) and by allocated bytes (``tracemalloc``), never by time.

The limits and the new error class are looked up inside the tests (``limits.X``, ``errors.Busy``),
so that each test fails for its own reason on code without the fix.
"""

from __future__ import annotations

import io
import json
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pypdf
import pytest
from fastapi import FastAPI
from pypdf.generic import (
    ArrayObject,
    DecodedStreamObject,
    DictionaryObject,
    FloatObject,
    NameObject,
)

from memstrata import MemoryOS, errors, limits
from memstrata.errors import StorageError, ValidationError
from memstrata.reader import documents
from memstrata.reader.documents import parse_document
from memstrata.server.rest import create_app
from tests.conftest import row_counts
from tests.server.conftest import Account, Server

pytestmark = pytest.mark.engines("sqlite", "postgres")

#: A content stream that draws nothing but holds one text operator, so it is parsed in full.
TEXT_OP = b"BT /F1 12 Tf (x) Tj ET\n"


# -- PDFs made to measure ---------------------------------------------------------------------


def _font(writer: pypdf.PdfWriter) -> DictionaryObject:
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    return DictionaryObject({NameObject("/F1"): writer._add_object(font)})


def _stream(writer: pypdf.PdfWriter, data: bytes, **entries: Any) -> Any:
    stream = DecodedStreamObject()
    stream.set_data(data)
    stream.update({NameObject(f"/{k}"): v for k, v in entries.items()})
    return writer._add_object(stream.flate_encode())


def _write(writer: pypdf.PdfWriter) -> bytes:
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def shared_content_pdf(content: bytes, pages: int) -> bytes:
    """``pages`` pages that all show one FlateDecode content stream ``content``."""
    writer = pypdf.PdfWriter()
    ref = _stream(writer, content)
    resources = DictionaryObject({NameObject("/Font"): _font(writer)})
    for _ in range(pages):
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Contents")] = ref
        page[NameObject("/Resources")] = resources
    return _write(writer)


def form_pdf(invocations: int) -> bytes:
    """One page whose small content draws one form XObject (text and 50,000 operators that draw
    nothing) ``invocations`` times: the page's own content is a few bytes."""
    writer = pypdf.PdfWriter()
    fonts = _font(writer)
    form = _stream(
        writer,
        TEXT_OP + b"q Q\n" * 50_000,
        Type=NameObject("/XObject"),
        Subtype=NameObject("/Form"),
        BBox=ArrayObject([FloatObject(0)] * 4),
        Resources=DictionaryObject({NameObject("/Font"): fonts}),
    )
    page = writer.add_blank_page(612, 792)
    page[NameObject("/Contents")] = _stream(writer, b"/Fm0 Do\n" * invocations)
    page[NameObject("/Resources")] = DictionaryObject(
        {
            NameObject("/Font"): fonts,
            NameObject("/XObject"): DictionaryObject({NameObject("/Fm0"): form}),
        }
    )
    return _write(writer)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many pages pypdf extracted text from and how many form XObjects it entered (pypdf's
    methods wrapped to count, behaving as before)."""
    calls = {"pages": 0, "forms": 0}

    def counting(name: str, key: str) -> None:
        original = getattr(pypdf.PageObject, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[key] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(pypdf.PageObject, name, wrapper)

    counting("extract_text", "pages")
    counting("extract_xform_text", "forms")
    return calls


def _peak_bytes(call: Callable[[], object]) -> tuple[int, BaseException | None]:
    """The most memory ``call`` allocated at once (tracemalloc), and what it raised."""
    raised: BaseException | None = None
    tracemalloc.start()
    try:
        call()
    except Exception as exc:  # the caller checks what was raised
        raised = exc
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak, raised


# -- finding 1: one .json upload exhausts memory ----------------------------------------------


@pytest.mark.parametrize("key_chars", [100_000, 1_000_000])
def test_a_long_key_on_many_leaves_is_refused_while_the_lines_are_made(key_chars: int) -> None:
    """Finding 1 of issue 24: json.dumps({"k" * 1_000_000: [0] * 1500}), 1 MB, made each leaf a
    line repeating its key (1.5 GB of lines, 2,989 MB peak) before the length was checked.  Now
    the key path is cut and the lines stop at MAX_DOCUMENT_CHARS: the parse allocates a few MB."""
    data = json.dumps({"k" * key_chars: [0] * 1500}).encode()
    peak, raised = _peak_bytes(lambda: parse_document("flood.json", data))
    assert isinstance(raised, ValidationError)
    assert f"more than {limits.MAX_DOCUMENT_CHARS} characters" in str(raised)
    assert peak < 20 * len(data) + 10_000_000, f"parsing allocated {peak:,} bytes"


def test_a_long_key_path_is_cut_not_repeated_in_full() -> None:
    """Finding 1 of issue 24: a key path is cut at MAX_JSON_PATH_CHARS characters (ending "…"),
    so one leaf's line is never longer than the path bound and its value."""
    bound = getattr(limits, "MAX_JSON_PATH_CHARS", 1000)
    text = parse_document("long.json", json.dumps({"a": {"k" * 5000: ["v", "w"]}}).encode())
    lines = text.splitlines()
    assert lines == [("a." + "k" * 5000)[: bound - 1] + "…: " + v for v in ("v", "w")]


def test_a_json_file_of_a_million_empty_objects_is_refused_before_it_is_parsed() -> None:
    """Finding 1 of issue 24: memory grows with a JSON file's values, not its text: 3 MB of "{},"
    parsed as a million objects took some 75 MB (a 20 MB upload, 500 MB) only to be "no text".
    Its values are counted before it is parsed (MAX_JSON_VALUES)."""
    data = b"[" + b"{}," * 1_000_000 + b"{}]"
    peak, raised = _peak_bytes(lambda: parse_document("empty.json", data))
    assert isinstance(raised, ValidationError)
    assert "JSON values" in str(raised)
    assert peak < 3 * len(data) + 10_000_000, f"parsing allocated {peak:,} bytes"


# -- finding 2: one PDF burns unbounded CPU ---------------------------------------------------


def test_the_reproduction_is_refused_by_the_default_content_bound_before_any_page(
    counted: dict[str, int],
) -> None:
    """Finding 2 of issue 24: 8 pages sharing one 70 MB (decompressed) content stream that draws
    nothing cost 5.3 s of CPU per page.  A page's content is counted before its text is read, so
    the default MAX_DOCUMENT_CONTENT_BYTES refuses the file before reading any page."""
    content = b"q Q\n" * 17_500_000 + TEXT_OP  # 70 MB
    data = shared_content_pdf(content, pages=8)
    assert len(data) < 200_000
    with pytest.raises(ValidationError, match="bytes of page content"):
        parse_document("bomb.pdf", data)
    assert counted["pages"] == 0


def test_content_shared_by_pages_counts_once_per_page(
    monkeypatch: pytest.MonkeyPatch, counted: dict[str, int]
) -> None:
    """Finding 2 of issue 24: one stream shown by every page is read for every page, so it
    counts for every page: with room for two and a half pages' content, the third page is
    refused before it is read."""
    content = TEXT_OP + b"q Q\n" * 25_000
    monkeypatch.setattr(
        documents, "MAX_DOCUMENT_CONTENT_BYTES", len(content) * 5 // 2, raising=False
    )
    with pytest.raises(ValidationError, match="bytes of page content"):
        parse_document("shared.pdf", shared_content_pdf(content, pages=8))
    assert counted["pages"] == 2


def test_a_pdf_of_too_many_pages_is_refused_before_any_page(
    monkeypatch: pytest.MonkeyPatch, counted: dict[str, int]
) -> None:
    """Finding 2 of issue 24: a 10 MB upload held ~71,000 pages, each read in turn.  A PDF of
    more than MAX_DOCUMENT_PAGES pages (2,000) is refused before any page is read."""
    assert getattr(limits, "MAX_DOCUMENT_PAGES", None) == 2000
    monkeypatch.setattr(documents, "MAX_DOCUMENT_PAGES", 2, raising=False)
    with pytest.raises(ValidationError, match="has 3 pages; a PDF may have 2"):
        parse_document("pages.pdf", shared_content_pdf(TEXT_OP, pages=3))
    assert counted["pages"] == 0


def test_the_cpu_budget_is_checked_between_pages(
    monkeypatch: pytest.MonkeyPatch, counted: dict[str, int]
) -> None:
    """Finding 2 of issue 24: nothing bounded the CPU time of one parse.  With no CPU time to
    spend, reading stops after the first page (the budget is checked between pages)."""
    monkeypatch.setattr(documents, "MAX_DOCUMENT_CPU_S", 0.0, raising=False)
    with pytest.raises(ValidationError, match="of CPU time"):
        parse_document("slow.pdf", shared_content_pdf(TEXT_OP, pages=3))
    assert counted["pages"] == 1


def test_the_cpu_budget_stops_form_xobjects_drawn_again_and_again(
    monkeypatch: pytest.MonkeyPatch, counted: dict[str, int]
) -> None:
    """Finding 2 of issue 24, a variant the content bound cannot see: a page of a few bytes draws
    one 200 kB form XObject 200 times (pypdf allows 5,000 per page), and each time it is parsed
    anew.  The CPU budget is checked while a page is read (pypdf's operator visitor), so the
    page stops after one form instead of reading all 200."""
    monkeypatch.setattr(documents, "MAX_DOCUMENT_CPU_S", 0.0, raising=False)
    with pytest.raises(ValidationError, match="of CPU time"):
        parse_document("forms.pdf", form_pdf(invocations=200))
    assert counted["pages"] == 1
    assert counted["forms"] <= 2


def test_pdfs_within_the_bounds_are_read_whole(counted: dict[str, int]) -> None:
    """Finding 2 of issue 24: the bounds refuse none of an ordinary PDF's pages or forms."""
    text = parse_document("fine.pdf", shared_content_pdf(TEXT_OP, pages=3))
    assert text == "x\n\nx\n\nx"
    assert parse_document("forms.pdf", form_pdf(invocations=3)).count("x") >= 1
    assert counted["pages"] == 4


# -- finding 8: documents skipped the NUL rule ------------------------------------------------

NUL_DOCUMENTS = {
    "a.txt": b"hello\x00world",
    "a.md": b"# hello\x00world",
    "a.json": json.dumps({"greeting": "hello\x00world"}).encode(),
}


@pytest.mark.parametrize("filename", NUL_DOCUMENTS)
def test_a_document_with_nul_is_refused_on_both_engines(
    mos: MemoryOS, alice_cube: str, engine: str, db_path: Path, filename: str
) -> None:
    """Finding 8 of issue 24: hello\\x00world in a .txt/.md/.json was stored on SQLite and a 500
    naming the database's user, host, port and name on PostgreSQL.  The parsed text passes
    limits.check_text like any content: a ValidationError (422) on both engines, nothing written."""
    before = row_counts(db_path) if engine == "sqlite" else None
    with pytest.raises(ValidationError, match="holds NUL"):
        mos.add_document(NUL_DOCUMENTS[filename], filename=filename, user_id="alice",
                         cube_id=alice_cube)  # fmt: skip
    assert mos.list_memories(alice_cube, user_id="alice") == []
    if before is not None:
        assert row_counts(db_path) == before


def test_a_lone_surrogate_in_json_is_refused() -> None:
    """Finding 8 of issue 24: a JSON escape can carry what no UTF-8 text holds; it is refused as
    in a message."""
    with pytest.raises(ValidationError, match="lone surrogate"):
        parse_document("a.json", b'{"k": "\\ud800"}')


def test_a_nul_upload_is_a_422_over_rest(owner_cube: tuple[Account, str]) -> None:
    """Finding 8 of issue 24: over REST the NUL document is a 422 invalid_input on both engines
    (it was a 500 on PostgreSQL)."""
    user, cube_id = owner_cube
    response = user.http.post(
        "/memories",
        files={"file": ("a.txt", b"hello\x00world", "text/plain")},
        data={"cube_id": cube_id},
    )
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "invalid_input"


def _storage_failure() -> None:
    raise StorageError(
        "write to postgresql://memstrata@db.internal:5432/prod failed: server closed the "
        "connection unexpectedly"
    )


def test_a_database_failure_shows_no_connection_details_over_rest(
    mos: MemoryOS, start_server: Callable[[FastAPI], Any], caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 8 of issue 24: a StorageError's message (which names the database's user, host,
    port and name) was the 500's message.  The client now gets storage_error with an id; the
    log has the message under that id."""
    app = create_app(mos)
    app.add_api_route("/test-only/storage", _storage_failure, methods=["GET"])
    with start_server(app) as url, caplog.at_level("ERROR", "memstrata.server"):
        response = httpx.get(f"{url}/test-only/storage", timeout=30)
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["code"] == "storage_error"
    for secret in ("memstrata@", "db.internal", "5432", "prod"):
        assert secret not in response.text
    error_id = error["message"].rsplit(" ", 1)[-1]
    assert any(
        error_id in r.getMessage() and "db.internal" in r.getMessage() for r in caplog.records
    )


def test_a_database_failure_shows_no_connection_details_over_mcp() -> None:
    """Finding 8 of issue 24: an MCP tool error carried the StorageError's message too."""
    from mcp.server.mcpserver.exceptions import ToolError

    from memstrata.server.mcp.reporting import reported

    with pytest.raises(ToolError) as raised:
        reported(ToolError)(_storage_failure)()
    assert "db.internal" not in str(raised.value) and "the database failed" in str(raised.value)


# -- finding 9: nothing bounded one user's heavy calls ----------------------------------------


@pytest.fixture
def heavy_calls(mos: MemoryOS) -> Iterator[Callable[[str], Any]]:
    """Take one of a user's heavy-call slots, as a running upload would (``memory.fairness``)."""
    with ExitStack() as stack:
        yield lambda user_id: stack.enter_context(mos._items.heavy.slot(user_id, "an upload"))


def test_a_user_runs_at_most_max_heavy_calls_at_once(
    mos: MemoryOS, alice_cube: str, heavy_calls: Callable[[str], Any]
) -> None:
    """Finding 9 of issue 24: a legal 1,000,000-character document took 959 s and nothing bounded
    how many one user ran at once.  With MAX_HEAVY_CALLS (2) running, another upload or large add
    of the same user is Busy (429) before any work; other users and small adds go on."""
    assert getattr(limits, "MAX_HEAVY_CALLS", None) == 2
    mos.create_cube("bob's", owner="bob", cube_id="bobs")
    for _ in range(2):
        heavy_calls("alice")
    large = "word " * (limits.HEAVY_ADD_CHARS // 5 + 1)
    with pytest.raises(errors.Busy, match="already runs 2 heavy calls"):
        mos.add_document(b"A note.", filename="n.txt", user_id="alice", cube_id=alice_cube)
    with pytest.raises(errors.Busy):
        mos.add([{"role": "user", "content": large[:30_000]}] * 2, user_id="alice",
                cube_id=alice_cube)  # fmt: skip
    assert mos.list_memories(alice_cube, user_id="alice") == []
    assert mos.add("A small note.", user_id="alice", cube_id=alice_cube)
    assert mos.add_document(b"Bob's note.", filename="b.txt", user_id="bob", cube_id="bobs")
    assert errors.Busy.status == 429


def test_a_heavy_call_gives_its_slot_back_however_it_ends(
    mos: MemoryOS, alice_cube: str, heavy_calls: Callable[[str], Any]
) -> None:
    """Finding 9 of issue 24: a refused or failed upload frees its slot, so a user is never
    locked out by their own errors."""
    heavy_calls("alice")
    for _ in range(3):
        with pytest.raises(ValidationError):
            mos.add_document(b"a\x00b", filename="n.txt", user_id="alice", cube_id=alice_cube)
    assert mos._items.heavy.running("alice") == 1
    assert mos.add_document(b"A note.", filename="n.txt", user_id="alice", cube_id=alice_cube)


def test_a_busy_upload_is_a_429_with_retry_after_over_rest(
    server: Server, owner_cube: tuple[Account, str]
) -> None:
    """Finding 9 of issue 24: over REST a user's third heavy call is 429 busy with Retry-After,
    which the client raises as memstrata.errors.Busy (it maps the codes of the first level of
    memstrata.errors)."""
    user, cube_id = owner_cube
    with ExitStack() as stack:
        for _ in range(2):
            stack.enter_context(server.memory._items.heavy.slot(user.user_id, "an upload"))
        response = user.http.post(
            "/memories", files={"file": ("a.txt", b"A note.", "text/plain")},
            data={"cube_id": cube_id},
        )  # fmt: skip
    assert response.status_code == 429, response.text
    assert response.headers["Retry-After"].isdigit()
    error = response.json()["error"]
    assert error["code"] == "busy"
    assert errors.Busy.code == "busy" and errors.Busy in errors.MemstrataError.__subclasses__()
