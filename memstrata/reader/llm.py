"""The llm reader and summariser: one structured chat call per batch.

``LLMReader.read(pages)`` makes one call per batch of pages whose lines fit ``batch_tokens``
(a hot segment may hold hundreds of pages: more than a small model's context).  The prompt shows each
page as ``[p1] 2024-05-08 Ann: text`` (short ids: cheap to copy and hard to garble) and asks for
``{"findings": [...]}``; the JSON schema sent with it lists those ids as the only citable sources,
so a server that enforces schemas (llama.cpp) cannot cite anything else.  The answer is checked
by ``reader.grounding`` whatever the server did: invalid or ungrounded findings are dropped; an
answer that is not the JSON asked for, or a failed call (``LLMError``), is retried ``retries``
times, then the fallback reader (the offline reader) reads that batch instead, with a warning
logged.  What the pages say (texts and speakers) is ``llm.neutral.neutralise``d: it cannot
become a control token of the model's prompt.
Model output that is not a valid, grounded finding never becomes memory text.

Both classes are thread-safe when their ``LLM`` and ``on_usage`` callback are.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memstrata.errors import LLMError
from memstrata.limits import MAX_NAME
from memstrata.llm.base import LLM, ChatMessage, Completion
from memstrata.llm.neutral import neutralise
from memstrata.model import MemoryItem
from memstrata.reader.findings import Finding, Reader
from memstrata.reader.grounding import FINDING_TYPES, Malformed, json_object, parse_findings
from memstrata.reader.offline import OfflineReader
from memstrata.text import count_tokens, one_line

log = logging.getLogger(__name__)

#: Called with every completion received (malformed ones too: their tokens were spent).
UsageCallback = Callable[[Completion], None]

_OFFLINE = OfflineReader()  # stateless, so one instance serves every LLMReader
_PAGE_CHARS = 1000
#: Tokens of page lines per call: with the prompt and the answer, within a 4,096-token context.
BATCH_TOKENS = 2000
_SUMMARY_CHARS = 1000

_READ_PROMPT = """\
You read conversation pages and extract what is worth remembering about the people in them.
Each page is shown as [id] date speaker: text.
Answer with a JSON object {"findings": [...]}. Each finding has:
- "type": "fact" (something that happened or holds), "profile" (an attribute of a person, with
  "key" such as name, age, lives_in, from, job, employer, birthday, partner, and "value"),
  "preference" (the subject likes, "polarity": 1, or dislikes, "polarity": -1, the thing in
  "key"), or "knowledge" (what the assistant said it knows or will do);
- "text": one short sentence in the third person that names the subject;
- "subject": the name of the person it is about;
- "sources": the ids of the pages that say it, e.g. ["p1"].
State only what the pages say, and cite only the ids shown.
If nothing is worth remembering, answer {"findings": []}."""

_SUMMARY_PROMPT = """\
Summarise these conversation pages in at most three sentences, keeping names, dates, places and
numbers. Use only what the pages say. Answer with a JSON object {"summary": "..."}."""

_SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"summary": {"type": "string"}},
    "required": ["summary"],
}


def findings_schema(page_ids: Sequence[str]) -> dict[str, Any]:
    """The JSON schema of an answer about pages citable as ``page_ids``."""
    finding = {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": list(FINDING_TYPES)},
            "text": {"type": "string"},
            "subject": {"type": "string"},
            "key": {"type": "string"},
            "value": {"type": "string"},
            "polarity": {"type": "integer", "enum": [-1, 0, 1]},
            "sources": {
                "type": "array",
                "items": {"type": "string", "enum": list(page_ids)},
                "minItems": 1,
            },
        },
        "required": ["type", "text", "subject", "sources"],
    }
    return {
        "type": "object",
        "properties": {"findings": {"type": "array", "items": finding}},
        "required": ["findings"],
    }


def batches(pages: Sequence[MemoryItem], tokens: int) -> list[list[MemoryItem]]:
    """``pages`` in order, cut into runs whose prompt lines come to at most ``tokens``
    (``text.count_tokens``, each page cut at ``_PAGE_CHARS`` as in the prompt); a page is
    never split."""
    found: list[list[MemoryItem]] = []
    size = tokens + 1
    for page in pages:
        cost = count_tokens(one_line(page.text, _PAGE_CHARS)) + 8  # + id, date and name
        if size + cost > tokens:
            found.append([])
            size = 0
        found[-1].append(page)
        size += cost
    return found


def render_pages(pages: Mapping[str, MemoryItem]) -> str:
    """One line per page: ``[id] YYYY-MM-DD speaker: text``.

    The speaker (else the role, else "user") and the text are each put on one line and cut
    (``text.one_line``, at ``MAX_NAME`` and ``_PAGE_CHARS`` characters): what a page holds (an
    imported MemCube's speaker may hold anything) can never start a line of the prompt, and,
    ``llm.neutral.neutralise``d, never holds a control token of the model's chat template.
    """
    lines = []
    for ref, page in pages.items():
        speaker = neutralise(one_line(page.speaker or page.role or "", MAX_NAME)) or "user"
        text = neutralise(one_line(page.text, _PAGE_CHARS))
        lines.append(f"[{ref}] {page.event_time:%Y-%m-%d} {speaker}: {text}")
    return "\n".join(lines)


class LLMReader:
    """Reads a batch of pages with one chat call; falls back to ``fallback`` on bad answers.

    ``fallback=None`` raises ``LLMError`` instead of falling back.  ``on_usage`` is called with
    each completion (to count tokens per cube); what it raises propagates.
    """

    name = "llm"

    def __init__(
        self,
        llm: LLM,
        *,
        fallback: Reader | None = _OFFLINE,
        retries: int = 1,
        on_usage: UsageCallback | None = None,
        max_tokens: int = 1024,
        batch_tokens: int = BATCH_TOKENS,
    ) -> None:
        if retries < 0:
            raise ValueError("retries must be 0 or more")
        self.llm = llm
        self.fallback = fallback
        self.retries = retries
        self.on_usage = on_usage
        self.max_tokens = max_tokens
        self.batch_tokens = batch_tokens

    def read(self, pages: Sequence[MemoryItem]) -> list[Finding]:
        """Grounded findings of ``pages``, each citing only their ids (see the module docstring):
        one call per batch of consecutive pages that fits ``batch_tokens``."""
        return [f for batch in batches(pages, self.batch_tokens) for f in self._read(batch)]

    def _read(self, pages: Sequence[MemoryItem]) -> list[Finding]:
        if not pages:
            return []
        refs = {f"p{n}": page for n, page in enumerate(pages, 1)}
        messages: list[ChatMessage] = [
            {"role": "system", "content": _READ_PROMPT},
            {"role": "user", "content": "Pages:\n" + render_pages(refs)},
        ]
        citable = {**refs, **{page.id: page for page in pages}}  # the real ids are fine too
        problem: Exception | None = None
        for _attempt in range(self.retries + 1):
            try:
                answer = self._complete(messages, findings_schema(list(refs)))
                return parse_findings(answer.text, citable)
            except (LLMError, Malformed) as exc:
                log.info("llm reader: unusable answer (%s)", exc)
                problem = exc
        return self._fall_back(pages, problem)

    def _complete(self, messages: list[ChatMessage], schema: dict[str, Any]) -> Completion:
        answer = self.llm.complete(messages, json_schema=schema, max_tokens=self.max_tokens)
        if self.on_usage is not None:
            self.on_usage(answer)
        return answer

    def _fall_back(self, pages: Sequence[MemoryItem], problem: Exception | None) -> list[Finding]:
        tries = self.retries + 1
        if self.fallback is None:
            raise LLMError(f"no usable answer from the chat model after {tries} tries: {problem}")
        log.warning(
            "llm reader: no usable answer after %d tries (%s); the %s reader reads these %d pages",
            tries, problem, self.fallback.name, len(pages),
        )  # fmt: skip
        return self.fallback.read(pages)


class LLMSummariser:
    """Writes a segment summary with one chat call; ``None`` tells the caller to keep its own."""

    def __init__(
        self,
        llm: LLM,
        *,
        on_usage: UsageCallback | None = None,
        max_tokens: int = 256,
        batch_tokens: int = BATCH_TOKENS,
    ) -> None:
        self.llm = llm
        self.on_usage = on_usage
        self.max_tokens = max_tokens
        self.batch_tokens = batch_tokens

    def summarise(self, texts: Sequence[str]) -> str | None:
        """A summary of ``texts`` (page lines, in order; when they come to more than
        ``batch_tokens``, the first and the last lines that fit), or None when there are none, the call
        fails, or the answer is not ``{"summary": …}`` with 1 to 1000 characters.  Never raises
        ``LLMError`` (it is logged); what ``on_usage`` raises propagates."""
        if not texts:
            return None
        lines = _within([neutralise(" ".join(t.split())) for t in texts], self.batch_tokens)
        messages: list[ChatMessage] = [
            {"role": "system", "content": _SUMMARY_PROMPT},
            {"role": "user", "content": "\n".join(lines)},
        ]
        try:
            answer = self.llm.complete(
                messages, json_schema=_SUMMARY_SCHEMA, max_tokens=self.max_tokens
            )
        except LLMError as exc:
            log.warning("llm summariser: the call failed (%s); keeping the extractive summary", exc)
            return None
        if self.on_usage is not None:
            self.on_usage(answer)
        return _summary(answer.text)


def _within(lines: list[str], tokens: int) -> list[str]:
    """``lines`` if they fit ``tokens``; else as many of the first and of the last as fit in
    half each (how a run of talk begins and where it ended up)."""
    if sum(map(count_tokens, lines)) <= tokens:
        return lines
    head: list[str] = []
    tail: list[str] = []
    for chosen, ordered in ((head, lines), (tail, reversed(lines))):
        used = 0
        for line in ordered:
            if used + count_tokens(line) > tokens // 2:
                break
            chosen.append(line)
            used += count_tokens(line)
    return head + tail[::-1]


def _summary(text: str) -> str | None:
    try:
        raw = json_object(text).get("summary")
    except Malformed:
        raw = None
    summary = " ".join(raw.split()) if isinstance(raw, str) else ""
    if not summary or len(summary) > _SUMMARY_CHARS:
        log.warning("llm summariser: unusable answer %.80r; keeping the extractive summary", text)
        return None
    return summary
