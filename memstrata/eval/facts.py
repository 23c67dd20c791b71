"""How good is the long tier? ``memstrata eval locomo --facts`` against LoCoMo's own notes.

LoCoMo carries, per session and speaker, **reference observations**: third-person facts, each
citing the turn(s) it came from ("Caroline attended an LGBTQ support group…", ``D1:3``).  After
each conversation is added and its background work is done, the cube's long-tier items (status
``generated`` or ``activated``) are compared with them:

* **observation recall**: the share of observations for which some long-tier item cites one of
  the same turns and says the same thing (content-word F1 ≥ the threshold);
* **precision**: the share of long-tier items that match some observation of the conversation
  at F1 ≥ the threshold (an item that matches nothing is noise to a reader);
* **unresolved**: the share of items still speaking in the first or second person ("I", "you"),
  which read wrongly out of context;
* **summary recall** and **summary F1**: how much of LoCoMo's summary of each session
  (``session_summary``) the long tier's facts of that session cover, in content words
  (recall), and how much else they say (F1), averaged over sessions.

Content words: lower-cased letters and digits, a possessive ``'s`` dropped, function words and
single letters removed; F1 over the two sets.  Both thresholds the issue names are reported (0.4
and 0.6).
"""

from __future__ import annotations

import hashlib
import re
import statistics
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from memstrata.embed.base import Embedder, fingerprint
from memstrata.eval.locomo import evidence, ingest, sessions
from memstrata.memory.system import MemoryOS
from memstrata.model import MemoryItem
from memstrata.reader import worthiness
from memstrata.reader.offline import OfflineReader

THRESHOLDS = (0.4, 0.6)
#: Items listed per call while reading a cube's long tier.
PAGE = 500

_FUNCTION_WORDS = frozenset(
    """a about after again all also am an and any are as at be because been before being both
    but by can could did do does doing during each few for from further had has have having he
    her here hers herself him himself his how i if in into is it its itself just me more most my
    myself no nor not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this
    those through to too under until up very was we were what when where which while who whom
    why will with would you your yours yourself yourselves""".split()
)
_WORD = re.compile(r"[a-z0-9]+")
_POSSESSIVE = re.compile(r"['’]s\b")
_PERSONAL = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|me|my|mine|myself|you|your|yours|you're)\b")


def content_words(text: str) -> set[str]:
    """The content words of ``text`` (see the module docstring).  Not ``answers.content_words``
    on purpose: a possessive must not hide a name ("Caroline's" is "caroline" here, where
    answer scoring keeps "carolines"), and a fuller list of function words keeps F1 on claims."""
    words = _WORD.findall(_POSSESSIVE.sub("", text.lower()))
    return {w for w in words if w not in _FUNCTION_WORDS and len(w) > 1}


def word_f1(a: set[str], b: set[str]) -> float:
    """F1 of two sets of content words (0 when either is empty)."""
    common = len(a & b)
    if not common:
        return 0.0
    precision, recall = common / len(a), common / len(b)
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class Observation:
    """One reference observation: whose, what, and the dia_ids it cites."""

    speaker: str
    text: str
    turns: frozenset[str]


def observations(sample: dict[str, Any]) -> Iterator[Observation]:
    """Every reference observation of a LoCoMo sample (those citing no turn are skipped)."""
    for by_speaker in (sample.get("observation") or {}).values():
        for speaker, notes in by_speaker.items():
            for note in notes:
                text, cited = note[0], note[1] if len(note) > 1 else ""
                raw = cited if isinstance(cited, list) else [cited]
                turns = frozenset(evidence({"evidence": [str(r) for r in raw]}))
                if turns:
                    yield Observation(speaker, text, turns)


def score(
    items: list[MemoryItem], external: dict[str, str], notes: list[Observation], threshold: float
) -> dict[str, float]:
    """Observation recall and item precision of one conversation at ``threshold``."""
    words = [content_words(i.text) for i in items]
    cites = [{external.get(s.item_id or "", "") for s in i.sources} for i in items]
    note_words = [content_words(n.text) for n in notes]
    recalled = sum(
        any(n.turns & c and word_f1(w, nw) >= threshold for w, c in zip(words, cites, strict=True))
        for n, nw in zip(notes, note_words, strict=True)
    )
    precise = sum(any(word_f1(w, nw) >= threshold for nw in note_words) for w in words)
    return {
        "observation_recall": recalled / len(notes) if notes else 0.0,
        "precision": precise / len(items) if items else 0.0,
    }


def session_summaries(sample: dict[str, Any]) -> dict[str, str]:
    """LoCoMo's summary of each session, by session number ("3" → text)."""
    found = {}
    for key, text in (sample.get("session_summary") or {}).items():
        if (m := re.fullmatch(r"session_(\d+)_summary", key)) and isinstance(text, str):
            found[m.group(1)] = text
    return found


def summary_coverage(
    sample: dict[str, Any], items: list[MemoryItem], external: dict[str, str]
) -> dict[str, float]:
    """How much of each session's reference summary the long tier's facts of that session
    cover: content-word recall and F1 of the facts' words against the summary's, averaged over
    sessions (a session's facts are those citing its turns, ``D3:…`` for session 3)."""
    words: dict[str, set[str]] = {}
    for item in items:
        for source in item.sources:
            if m := re.fullmatch(r"D(\d+):\d+", external.get(source.item_id or "", "")):
                words.setdefault(m.group(1), set()).update(content_words(item.text))
    recalls, f1s = [], []
    for number, text in session_summaries(sample).items():
        wanted, have = content_words(text), words.get(number, set())
        recalls.append(len(wanted & have) / len(wanted) if wanted else 0.0)
        f1s.append(word_f1(have, wanted))
    if not recalls:
        return {}
    return {"summary_recall": statistics.fmean(recalls), "summary_f1": statistics.fmean(f1s)}


def long_items(mos: MemoryOS, cube_id: str, user_id: str) -> list[MemoryItem]:
    """Every current long-tier item of a cube, oldest first."""
    found: list[MemoryItem] = []
    while batch := mos.list_memories(
        cube_id, user_id=user_id, filters={"tier": "long"}, limit=PAGE, offset=len(found)
    ):
        found += batch
    return found


def evaluate(
    data: list[dict[str, Any]],
    open_memory: Callable[[str], MemoryOS],
    cube_settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Observation recall and precision per conversation and overall (micro-averaged: every
    observation, and every item, counts once)."""
    rows: dict[str, dict[str, Any]] = {}
    totals: dict[str, list[float]] = {}  # metric → [weighted sum, weight]
    for sample in data:
        notes = list(observations(sample))
        with (
            tempfile.TemporaryDirectory() as folder,
            open_memory(str(Path(folder) / "facts.db")) as mos,
        ):
            cube_id, external = ingest(mos, sample, cube_settings)
            items = long_items(mos, cube_id, "eval")
        unresolved = sum(bool(_PERSONAL.search(i.text)) for i in items)
        row: dict[str, Any] = {"observations": len(notes), "items": len(items),
                               "unresolved": round(unresolved / max(1, len(items)), 3)}  # fmt: skip
        summary = summary_coverage(sample, items, external)
        row |= {k: round(v, 3) for k, v in summary.items()}
        weights = {"observation_recall": len(notes), "precision": len(items)}
        for threshold in THRESHOLDS:
            for metric, value in score(items, external, notes, threshold).items():
                row[f"{metric}@{threshold}"] = round(value, 3)
                _tally(totals, f"{metric}@{threshold}", value, weights[metric])
        for key, value in summary.items():
            _tally(totals, key, value, len(session_summaries(sample)))
        _tally(totals, "unresolved", unresolved / max(1, len(items)), len(items))
        rows[str(sample["sample_id"])] = row
    overall: dict[str, Any] = {k: round(s / w, 3) if w else 0.0 for k, (s, w) in totals.items()}
    overall["observations"] = sum(r["observations"] for r in rows.values())
    overall["items"] = sum(r["items"] for r in rows.values())
    return {"overall": overall, "by_conversation": rows}


def _tally(totals: dict[str, list[float]], key: str, value: float, weight: float) -> None:
    """Add ``value`` with ``weight`` to the running weighted sum of ``key``."""
    total = totals.setdefault(key, [0.0, 0.0])
    total[0] += value * weight
    total[1] += weight


def table(result: dict[str, Any]) -> list[str]:
    """The result as aligned text lines, one row per conversation and one overall."""
    metrics = [f"{m}@{t}" for t in THRESHOLDS for m in ("observation_recall", "precision")]
    head = f"{'conversation':<14}{'obs':>5}{'items':>7}" + "".join(f"{m:>26}" for m in metrics)
    extra = ("unresolved", "summary_recall", "summary_f1")
    lines = [head + "".join(f"{m:>16}" for m in extra)]
    groups = {**result["by_conversation"], "overall": result["overall"]}
    for name, row in groups.items():
        cells = "".join(f"{row[m]:>26.3f}" for m in metrics)
        cells += "".join(f"{row.get(m, float('nan')):>16.3f}" for m in extra)
        lines.append(f"{name:<14}{row['observations']:>5}{row['items']:>7}{cells}")
    return lines


def turns(sample: dict[str, Any]) -> list[MemoryItem]:
    """A sample's turns as the pages a reader gets (id = dia_id), in order."""
    pages = []
    for session_id, messages in sessions(sample["conversation"]):
        for m in messages:
            when = datetime.fromisoformat(m["timestamp"].replace("Z", "+00:00"))
            pages.append(MemoryItem(id=m["id"], cube_id="c", text=m["content"], role="user",
                                    speaker=m["name"], session_id=session_id, event_time=when))  # fmt: skip
    return pages


def fit_models(
    data: list[dict[str, Any]], embedder: Embedder, source: str, l2: float = 50.0
) -> dict[str, Any]:
    """The worthiness models fitted on ``data`` (the file ``reader/worthiness.json`` holds).

    Every note the offline reader can write gets a label in {0, ½, 1}: half for matching
    (content-word F1 ≥ 0.4) some reference observation of its conversation (what precision
    counts), half for matching one that cites the note's own turn (what recall counts: this
    sentence *yields* that observation).  The first alone also credits short notes that match
    an observation about something else by chance; the second alone misses notes that say
    again what another turn said.  The soft label was better out of fold than either (0.678 /
    0.666 against 0.660 / 0.655 and 0.633 / 0.630, the vectors model).

    Each model has two stages: a regression over the note's features, then one over where
    that probability stands among its peers' (``worthiness.among_peers``: the notes of its
    speaker in its session; a session yields a handful of observations per speaker), fitted on
    first-stage probabilities out of fold (stacking), kept only when it does better out of fold
    than the first stage alone.  The threshold is the one that maximises
    the smaller of observation recall and precision of notes, out of fold (leave one
    conversation out, nested for the second stage); those figures are recorded with it.
    """
    reader = OfflineReader()
    rows: list[tuple[int, MemoryItem, str, str]] = []
    matches: list[bool] = []  # matches some observation of the conversation
    recalls: list[set[tuple[int, int]]] = []  # (conversation, observation) it recalls
    total = 0
    for c, sample in enumerate(data):
        notes = list(observations(sample))
        total += len(notes)
        words = [content_words(n.text) for n in notes]
        for page, sentence, note in reader.candidate_notes(turns(sample)):
            rows.append((c, page, sentence, note))
            f1 = [word_f1(content_words(note), w) for w in words]
            matches.append(any(f >= 0.4 for f in f1))
            recalls.append({(c, j) for j, n in enumerate(notes)
                            if page.id in n.turns and f1[j] >= 0.4})  # fmt: skip
    cheap = np.array([worthiness.cheap_features(r[2], r[3]) for r in rows], np.float64)
    vectors = embedder.embed_passages([r[3] for r in rows]).astype(np.float64)
    precise = np.array(matches)
    y = (precise.astype(np.float64) + np.array([bool(r) for r in recalls], np.float64)) / 2
    conv = np.array([r[0] for r in rows])
    peers = [(r[0], r[1].session_id, r[1].speaker) for r in rows]
    models: dict[str, Any] = {}
    for name, x, owner in (("words", cheap, None), ("vectors", np.hstack([cheap, vectors]),
                                                     fingerprint(embedder))):  # fmt: skip
        model, figures = _fit_model(x, y, owner, conv, peers, (precise, recalls, total), l2)
        models[name] = model.as_dict() | {"cross_validated": figures}
    digest = hashlib.sha256(Path(source).read_bytes()).hexdigest()
    return {
        "features": list(worthiness.FEATURES),
        "provenance": {
            "data": f"{Path(source).name} (sha256 {digest}), "
            f"{len(data)} conversations: {', '.join(str(s['sample_id']) for s in data)}",
            "command": f"memstrata eval fit-facts --data {Path(source).name}",
            "labels": "half for matching a reference observation of the note's conversation "
            "at content-word F1 >= 0.4, half for matching one that cites the note's turn",
            "l2": l2,
            "notes": len(rows),
            "positive": int(precise.sum()),
            "yielding": int(sum(bool(r) for r in recalls)),
        },
        "models": models,
    }


def _fit_model(
    x: np.ndarray,
    y: np.ndarray,
    owner: str | None,
    conv: np.ndarray,
    peers: list[Any],
    truth: tuple[np.ndarray, list[set[tuple[int, int]]], int],
    l2: float,
) -> tuple[worthiness.Model, dict[str, Any]]:
    """One worthiness model (one or two stages, see ``fit_models``) and its out-of-fold
    figures; ``truth``: which notes match an observation, which each recalls, how many."""
    # Out of fold, both stages: for each conversation held out, the second stage learns
    # from first-stage probabilities that are themselves out of fold among the others.
    alone, both = np.zeros(len(x)), np.zeros(len(x))
    for c in sorted(set(conv.tolist())):
        first = _first_stage(x, y, conv, l2, among=conv != c)
        alone[conv == c] = first[conv == c]
        stage2 = _fit(worthiness.among_peers(first, peers), y, conv != c, l2)
        both[conv == c] = stage2.probabilities(worthiness.among_peers(first, peers)[conv == c])
    threshold, figures = _best_threshold(alone, *truth)
    threshold2, figures2 = _best_threshold(both, *truth)
    second: worthiness.Model | None = None
    if _worst(figures2) > _worst(figures):  # the second stage only where it helps
        one_stage = {k: v for k, v in figures.items() if k != "curve"}
        threshold, figures = threshold2, {**figures2, "one_stage": one_stage}
        everyone = np.ones(len(x), bool)
        first = _first_stage(x, y, conv, l2, among=everyone)
        second = _fit(worthiness.among_peers(first, peers), y, everyone, l2)
    mean, scale, coef, b = worthiness.fit(x, y, l2)
    return worthiness.Model(owner, mean, scale, coef, b, threshold, peers=second), figures


def _worst(figures: dict[str, Any]) -> float:
    """The smaller of a model's out-of-fold observation recall and precision."""
    return float(min(figures["observation_recall"], figures["precision"]))


def _fit(x: np.ndarray, y: np.ndarray, rows: np.ndarray, l2: float) -> worthiness.Model:
    """A regression fitted on ``rows`` of ``x`` (its threshold is not used)."""
    mean, scale, coef, b = worthiness.fit(x[rows], y[rows], l2)
    return worthiness.Model(None, mean, scale, coef, b, 0.5)


def _first_stage(
    x: np.ndarray, y: np.ndarray, conv: np.ndarray, l2: float, among: np.ndarray
) -> np.ndarray:
    """First-stage probabilities of every row: for a conversation in ``among``, from a model
    fitted on the other conversations in ``among`` (out of fold); for one outside it, from a
    model fitted on all of ``among`` (as it would be for a conversation never seen)."""
    chances = np.zeros(len(x))
    inside = sorted(set(conv[among].tolist()))
    for c in inside:
        # With one conversation in ``among`` there are no others to fit on: in sample then.
        fitted = among & (conv != c) if len(inside) > 1 else among
        chances[conv == c] = _fit(x, y, fitted, l2).probabilities(x[conv == c])
    outside = ~np.isin(conv, inside)
    if outside.any():
        chances[outside] = _fit(x, y, among, l2).probabilities(x[outside])
    return chances


def _best_threshold(
    chances: np.ndarray, precise: np.ndarray, recalls: list[set[tuple[int, int]]], total: int
) -> tuple[float, dict[str, Any]]:
    """The threshold maximising min(observation recall, precision) of the kept notes, and
    those figures with the whole curve (every 0.1; at 0, every note is kept)."""
    best: tuple[float, float, dict[str, Any]] = (-1.0, 0.5, {})
    curve = []
    for threshold in np.arange(0.0, 0.95, 0.025):
        kept = chances >= threshold
        if not kept.any():
            break
        recalled = set().union(*(r for r, k in zip(recalls, kept, strict=True) if k))
        recall, precision = len(recalled) / total, float(precise[kept].mean())
        figures = {"observation_recall": round(recall, 3), "precision": round(precision, 3)}
        if round(threshold * 40) % 4 == 0:  # every 0.1 into the record
            curve.append({"threshold": round(float(threshold), 1), **figures})
        if min(recall, precision) > best[0]:
            best = (min(recall, precision), round(float(threshold), 3), figures)
    # The curve's first point keeps every note: the ceiling of what any threshold can recall.
    return best[1], {**best[2], "curve": curve}
