"""Checking a model's answer before any of it can become memory text.

``parse_findings`` turns the JSON an LLM reader asked for into ``Finding`` objects, strictly:

* an answer that is not a JSON object with a ``findings`` list is ``Malformed`` (the reader
  retries, then falls back to the offline reader);
* a finding with an unknown type, empty or over-long text, a field of the wrong type, no
  sources, or a source that is not one of the pages given is dropped;
* so is a finding that is not grounded in the words of its pages: its text (less the subject's
  name), a profile value and a preference's object must each share a content word with the pages
  it cites.  A paraphrase passes; a statement about something the pages never mention does not;
* first-person text ("I moved to Paris", as small models echo it) is put in the third person
  ("Ann moved to Paris"), so the memory names its subject (knowledge is left as the assistant
  said it).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any, get_args

from memstrata.model import MemoryItem
from memstrata.reader.findings import Finding, FindingType
from memstrata.reader.notes import third_person
from memstrata.text import STOPWORDS, terms

log = logging.getLogger(__name__)

FINDING_TYPES: tuple[str, ...] = get_args(FindingType)
MAX_TEXT = 500
_MAX_FIELD = 120
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)
_KEY_CHARS = re.compile(r"[^\w]+")


class Malformed(ValueError):
    """The model's answer is not the JSON object that was asked for."""


class _Drop(ValueError):
    """One finding is invalid (internal: the finding is skipped, the others kept)."""


def json_object(text: str) -> dict[str, Any]:
    """The JSON object in ``text`` (bare, in a code fence, or amid chatter); raises ``Malformed``."""
    body = _FENCE.sub("", text.strip())
    for candidate in (body, body[body.find("{") : body.rfind("}") + 1]):
        try:
            value = json.loads(candidate)
        except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
            continue
        if isinstance(value, dict):
            return value
    raise Malformed(f"not a JSON object: {text[:80]!r}")


def parse_findings(text: str, pages: Mapping[str, MemoryItem]) -> list[Finding]:
    """The valid, grounded findings of the answer ``text`` about ``pages`` (citable id → page).

    Raises ``Malformed`` when ``text`` is not a JSON object with a ``findings`` list.
    """
    entries = json_object(text).get("findings")
    if not isinstance(entries, list):
        raise Malformed("the JSON object has no 'findings' list")
    found: list[Finding] = []
    for entry in entries:
        try:
            found.append(_finding(entry, pages))
        except _Drop as why:
            log.debug("dropped a finding (%s): %.200r", why, entry)
    return found


def _finding(entry: object, pages: Mapping[str, MemoryItem]) -> Finding:
    if not isinstance(entry, dict):
        raise _Drop("not an object")
    kind = entry.get("type")
    if kind not in FINDING_TYPES:
        raise _Drop(f"unknown type {kind!r}")
    cited = _sources(entry.get("sources"), pages)
    default_subject = cited[0].speaker or cited[0].role or "user"
    subject = _text(entry.get("subject"), "subject", _MAX_FIELD) or default_subject
    text = _text(entry.get("text"), "text", MAX_TEXT, required=True) or ""
    finding = Finding(
        type=kind,
        # Small models often echo the page ("I love…"); a memory must name its subject.
        text=text if kind == "knowledge" else third_person(text, subject),
        subject=subject,
        sources=tuple(page.id for page in cited),
        key=_key(entry.get("key"), kind),
        value=_text(entry.get("value"), "value", _MAX_FIELD),
        polarity=_polarity(entry.get("polarity"), kind),
        explicit=_flag(entry.get("explicit"), "explicit", default=True),
    )
    _check_complete(finding)
    _check_grounded(finding, " ".join(page.text for page in cited))
    return finding


def _sources(raw: object, pages: Mapping[str, MemoryItem]) -> list[MemoryItem]:
    if not isinstance(raw, list) or not raw:
        raise _Drop("no sources")
    if not all(isinstance(ref, str) and ref in pages for ref in raw):
        raise _Drop(f"sources {raw!r} are not all among the pages given")
    unique = {pages[ref].id: pages[ref] for ref in raw}
    return list(unique.values())


def _text(raw: object, name: str, limit: int, *, required: bool = False) -> str | None:
    if raw is None and not required:
        return None
    if not isinstance(raw, str):
        raise _Drop(f"{name} is not a string")
    text = " ".join(raw.split())
    if required and not text:
        raise _Drop(f"{name} is empty")
    if len(text) > limit:
        raise _Drop(f"{name} is longer than {limit} characters")
    return text or None


def _key(raw: object, kind: str) -> str | None:
    key = _text(raw, "key", _MAX_FIELD)
    if key is None or kind != "profile":
        return key
    return _KEY_CHARS.sub("_", key.lower()).strip("_") or None  # "Lives in" → "lives_in"


def _polarity(raw: object, kind: str) -> int:
    if raw is None:
        return 0
    if isinstance(raw, bool) or not isinstance(raw, int) or raw not in (-1, 0, 1):
        raise _Drop(f"polarity {raw!r} is not -1, 0 or 1")
    return raw if kind == "preference" else 0


def _flag(raw: object, name: str, *, default: bool) -> bool:
    if raw is None:
        return default
    if not isinstance(raw, bool):
        raise _Drop(f"{name} is not a boolean")
    return raw


def _check_complete(finding: Finding) -> None:
    if finding.type == "profile" and not (finding.key and finding.value):
        raise _Drop("a profile finding needs a key and a value")
    if finding.type == "preference" and not (finding.key and finding.polarity):
        raise _Drop("a preference needs a key (its object) and a polarity of 1 or -1")


def _check_grounded(finding: Finding, cited: str) -> None:
    words = set(terms(cited))
    name = set(terms(finding.subject))
    claims = [finding.text]
    if finding.type == "profile":
        claims.append(finding.value or "")
    if finding.type == "preference":
        claims.append(finding.key or "")
    for claim in claims:
        content = set(terms(claim)) - STOPWORDS - name
        if not content & words:
            raise _Drop(f"{claim!r} shares no word with the pages it cites")
