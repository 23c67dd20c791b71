"""Documents: parsing by type, chunking by paragraph and sentence, and ``add_document``."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from memstrata import MemoryOS
from memstrata.errors import PermissionDenied, ValidationError
from memstrata.reader.documents import chunk_text, parse_document
from tests.conftest import row_counts


def minimal_pdf(lines: list[str]) -> bytes:
    """A one-page PDF whose text is ``lines`` (built by hand: the test needs no PDF writer)."""
    stream = "BT /F1 12 Tf 72 720 Td 14 TL " + " ".join(f"({t}) Tj T*" for t in lines) + " ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        "/Resources << /Font << /F1 5 0 R >> >> >>",
        f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = "%PDF-1.4\n", []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n{body}\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n"
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
    return out.encode("latin-1")


def test_text_markdown_json_and_pdf_are_parsed() -> None:
    assert parse_document("a.txt", "\ufeffplain text".encode()) == "plain text"
    assert parse_document("A.MD", b"# Title\n\nbody") == "# Title\n\nbody"
    data = {"user": {"name": "Ada", "langs": ["en", "fr"]}, "n": 3, "none": None}
    assert parse_document("p.json", json.dumps(data).encode()).splitlines() == [
        "user.name: Ada", "user.langs[0]: en", "user.langs[1]: fr", "n: 3",
    ]  # fmt: skip
    text = parse_document("doc.pdf", minimal_pdf(["Hello from a PDF.", "Second line."]))
    assert "Hello from a PDF." in text and "Second line." in text


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("a.exe", b"MZ", "unsupported document type"),
        ("noext", b"text", "unsupported document type"),
        ("a.txt", b"\xff\xfe\x00bad", "not UTF-8"),
        ("a.json", b"{nope", "not valid JSON"),
        ("a.pdf", b"%PDF-1.4 truncated", "not a readable PDF"),
        ("a.txt", b"  \n\n ", "contains no text"),
    ],
)
def test_bad_documents_are_clear_errors(name: str, data: bytes, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        parse_document(name, data)


def test_chunks_keep_paragraphs_whole_and_spans_exact() -> None:
    paragraphs = [f"Paragraph {n} has a sentence. And another one here." for n in range(6)]
    text = "\n\n".join(paragraphs)
    chunks = chunk_text(text, size=120, overlap=0)
    assert all(len(c.text) <= 120 and text[c.start : c.end] == c.text for c in chunks)
    # no paragraph is cut: each starts a chunk or lies wholly inside one
    for p in paragraphs:
        assert any(p in c.text for c in chunks)
    assert " ".join(c.text for c in chunks).count("Paragraph") == 6  # no overlap asked


def test_long_paragraphs_split_at_sentences_then_words_with_overlap() -> None:
    sentences = [f"Sentence number {n} talks about topic {n}." for n in range(20)]
    text = " ".join(sentences) + " " + "x" * 10 + " " + "word " * 60
    chunks = chunk_text(text, size=100, overlap=45)
    assert all(len(c.text) <= 100 and text[c.start : c.end] == c.text for c in chunks)
    for s in sentences:  # sentences that fit are never cut
        assert any(s in c.text for c in chunks)
    # consecutive chunks share at most the overlap, and always move forward
    for a, b in itertools.pairwise(chunks):
        assert b.start > a.start and max(0, a.end - b.start) <= 45
    assert any(a.end > b.start for a, b in itertools.pairwise(chunks))
    assert chunks[-1].end == len(text.rstrip())


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (10, 10), (10, -1)])
def test_bad_chunk_settings_are_rejected(size: int, overlap: int) -> None:
    with pytest.raises(ValidationError):
        chunk_text("some text", size, overlap)


def test_add_document_stores_searchable_chunks_with_sources(
    mos: MemoryOS, alice_cube: str, db_path: Path
) -> None:
    body = "\n\n".join(
        [
            "The boiler is serviced every October by Hansen Heating.",
            "The spare key is kept under the blue flowerpot by the back door.",
        ]
    )
    ids = mos.add_document(body.encode(), filename="house.md", user_id="alice", cube_id=alice_cube)
    items = [mos.get(i, user_id="alice") for i in ids]
    assert all(i.type == "chunk" and i.tier == "long" for i in items)
    assert items[0].metadata["document"] == "house.md"
    source = items[0].sources[0]
    assert source.uri == "document:house.md"
    assert source.span is not None and body[source.span[0] : source.span[1]] == items[0].text
    hits = mos.search("where is the spare key", user_id="alice", top_k=1)
    assert "flowerpot" in hits[0].item.text
    before = row_counts(db_path)
    assert mos.add_document(body.encode(), filename="house.md", user_id="alice",
                            cube_id=alice_cube) == ids  # fmt: skip
    assert row_counts(db_path) == before  # the same bytes again store nothing


def test_add_document_checks_everything_before_writing(
    mos: MemoryOS, alice_cube: str, db_path: Path
) -> None:
    before = row_counts(db_path)
    with pytest.raises(PermissionDenied):
        mos.add_document(b"text", filename="a.txt", user_id="bob", cube_id=alice_cube)
    with pytest.raises(ValidationError):
        mos.add_document(b"text", filename="a.docx", user_id="alice", cube_id=alice_cube)
    with pytest.raises(ValidationError):
        mos.add_document("text", filename="a.txt", user_id="alice", cube_id=alice_cube)  # type: ignore[arg-type]
    assert row_counts(db_path) == before
