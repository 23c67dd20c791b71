"""What a piece of feedback on the memory asks, read by rules: a pure function of its text.

``read_feedback(text)`` tells four kinds apart (``classify`` gives the kind alone):

* **confirm** — "yes, that's right", "correct", "exactly": nothing but assent;
* **forget** — "forget that I smoke", "please delete what I said about my ex": the rest of the
  sentence says what to forget;
* **correct** — "No, I moved to Porto, not Lisbon", "Actually, I'm a paramedic now", or any
  plain statement: what is left once the markers of a correction ("no", "that's wrong",
  "actually", ...) are taken off is the corrected statement, and a value it rejects
  ("not Lisbon") is kept apart as ``replaced``;
* **invalidate** — "that's wrong", "no, that's not true", "I never said that": a rejection
  with no new statement.

Text that is none of these (empty once the markers are off, "hmm") has the kind None.  The
reader of conversation turns may use it as it is: it imports nothing of the core.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memstrata.model import FeedbackKind

_FORGET = re.compile(
    r"^(?:please\s+|can you\s+|could you\s+)?(?:forget|erase|delete|remove|unlearn|"
    r"stop remembering|don't remember|do not remember)\b[\s,:]*"
    r"(?:about\s+|the fact that\s+|that\s+|what i (?:said|told you) about\s+|everything about\s+)?",
    re.I,
)
#: Words that may make up an assent (at least one of ``_YES`` among them, nothing else).
_ASSENT = frozenset(
    "yes yeah yep yup correct right exactly true indeed confirmed confirm absolutely sure perfect "
    "precisely that that's thats it it's is was so all good spot on quite you're you are".split()
)
_YES = frozenset(
    "yes yeah yep yup correct right exactly true indeed confirmed confirm absolutely precisely".split()
)
_NEGATION = re.compile(r"\b(?:no|not|never|wrong|incorrect|false|isn't|wasn't|nope|nah)\b", re.I)
#: A rejection at the start of the feedback, taken off before the statement that follows it.
_REJECTION = re.compile(
    r"^(?:no+|nope|nah|wrong|incorrect|false|not quite|not really|"
    r"(?:that|this|it)(?:'s| is| was) (?:wrong|incorrect|false|not (?:right|true|correct)|"
    r"a mistake|outdated|out of date|old news)|you(?:'re| are) wrong|you got (?:that|it) wrong|"
    r"(?:that|this)(?:'s| is) not what i said|i never said (?:that|so)|i didn't say (?:that|so))"
    r"\b[\s,.;:!-]*",
    re.I,
)
#: Words that announce a correction, taken off too ("actually, ..."); they reject nothing alone.
_LEAD = re.compile(
    r"^(?:actually|in fact|well|sorry|oops|correction|to correct that|update|i meant(?: to say)?|"
    r"let me correct (?:that|myself)|rather|instead)\b[\s,.;:!-]*",
    re.I,
)
#: A value the statement rejects: "..., not Lisbon", "... rather than Lisbon".
_REPLACED = re.compile(
    r"[\s,;]*(?:\b(?:and |but )?not|\brather than|\binstead of)\s+(?:in |at |to |a |an |the )?"
    r"([^,.;!?]+?)\s*(?=[,.;!?]|$)",
    re.I,
)


@dataclass(frozen=True)
class FeedbackReading:
    """What ``read_feedback`` found: the kind (None: none of the four), the statement (the
    corrected statement for ``correct``, what to forget for ``forget``, else what is left of the
    text), and for ``correct`` the value it rejects, if it names one."""

    kind: FeedbackKind | None
    statement: str
    replaced: str | None = None


def classify(text: str) -> FeedbackKind | None:
    """The kind of feedback ``text`` is (see the module docstring), or None."""
    return read_feedback(text).kind


def read_feedback(text: str) -> FeedbackReading:
    """Read ``text`` as feedback on the memory (see the module docstring)."""
    plain = " ".join(text.replace("\u2019", "'").split())
    forget = _FORGET.match(plain)
    if forget:
        return FeedbackReading("forget", plain[forget.end() :].strip(" .!"))
    if _assent(plain):
        return FeedbackReading("confirm", "")
    rest, rejected = _strip(plain)
    if _says_something(rest):
        return _correction(rest)
    return FeedbackReading("invalidate" if rejected else None, rest)


def _assent(text: str) -> bool:
    """Whether ``text`` is nothing but assent ("yes, that's right")."""
    words = re.findall(r"[a-z']+", text.lower())
    return (
        bool(words)
        and set(words) <= _ASSENT
        and bool(set(words) & _YES)
        and not (_NEGATION.search(text))
    )


def _strip(text: str) -> tuple[str, bool]:
    """``text`` without its leading rejections and announcements; whether it rejected."""
    rejected = False
    while True:
        found = _REJECTION.match(text)
        if found and found.end() > 0:
            rejected, text = True, text[found.end() :]
            continue
        lead = _LEAD.match(text)
        if lead and lead.end() > 0:
            text = text[lead.end() :]
            continue
        return text.strip(), rejected


def _says_something(text: str) -> bool:
    """Whether what is left is a statement: two words or more, one of them not a marker."""
    words = re.findall(r"[A-Za-z0-9']+", text)
    return len(words) >= 2 and not _assent(text) and not _REJECTION.fullmatch(text)


def _correction(statement: str) -> FeedbackReading:
    """A ``correct`` reading of ``statement``: the rejected value taken out of it."""
    found = _REPLACED.search(statement)
    if found is None:
        return FeedbackReading("correct", statement)
    kept = (statement[: found.start()] + statement[found.end() :]).strip(" ,;")
    if len(re.findall(r"[A-Za-z0-9']+", kept)) < 2:  # "Porto, not Lisbon": keep it whole
        return FeedbackReading("correct", statement, found.group(1).strip())
    return FeedbackReading("correct", kept, found.group(1).strip())
