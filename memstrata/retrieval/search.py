"""Hybrid retrieval: BM25 and dense cosine over the caller's cubes, fused by RRF."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import date, datetime, time, timezone

from memstrata.config import Settings
from memstrata.embed.base import Embedder, Vectors
from memstrata.filters import Filters
from memstrata.model import Hit, MemoryItem
from memstrata.retrieval import agreement, timeline
from memstrata.retrieval.decompose import decompose, interleave
from memstrata.retrieval.explain import adjusted, joined, noted, scaled
from memstrata.retrieval.feedback import feedback_channel
from memstrata.retrieval.fusion import Fused, channel_parts, reciprocal_rank_fusion
from memstrata.retrieval.question import as_speakers, dates, near, periods, subjects
from memstrata.retrieval.stages import CLOCK
from memstrata.store.base import SearchIndex, Store


def candidate_width(settings: Settings, top_k: int) -> int:
    """How many candidates each channel contributes before fusion."""
    return max(settings.search_candidates, 2 * top_k)


def fuse_channels(
    keyword: Sequence[tuple[str, float]],
    dense: Sequence[tuple[str, float]],
    settings: Settings,
    dated: Sequence[tuple[str, float]] = (),
    feedback: Sequence[tuple[str, float]] = (),
) -> list[Fused]:
    """The keyword and dense rankings fused by weighted RRF (``rrf_k`` and the two weights);
    ``dated``, the dense ranking within the days a query names, weighs as the dense one;
    ``feedback``, the second dense pass (``retrieval.feedback``), by ``feedback_weight``."""
    channels = {"keyword": keyword, "dense": dense}
    if dated:
        channels["dated"] = dated
    if feedback:
        channels["feedback"] = feedback
    return reciprocal_rank_fusion(channels, channel_weights(settings), settings.rrf_k)


def channel_weights(settings: Settings) -> dict[str, float]:
    """Each channel's weight in fusion (the dated channel weighs as the dense one, the feedback
    channel ``feedback_weight``)."""
    return {"keyword": settings.keyword_weight, "dense": settings.dense_weight,
            "dated": settings.dense_weight, "feedback": settings.feedback_weight}  # fmt: skip


#: Share of its best adjacent turn's fused score that a turn gains (see ``smooth_neighbours``).
NEIGHBOUR_WEIGHT = 0.6
#: Factor on the score of an item spoken by someone a query does not name, when it names
#: speakers (see ``retrieval.question``).
OTHER_SPEAKER = 0.5
#: Factor on the score of an item from (about) a date the query names.
DATE_BOOST = 2.0


def hybrid_search(
    store: SearchIndex,
    embedder: Embedder,
    settings: Settings,
    query: str,
    cube_ids: Sequence[str],
    filters: Filters,
    top_k: int,
    *,
    neighbour_weight: float = NEIGHBOUR_WEIGHT,
) -> list[Hit]:
    """The ``top_k`` best items for ``query`` in ``cube_ids`` passing ``filters``, best first.

    Each channel contributes its best ``max(search_candidates, 2 * top_k)`` candidates; ``Hit.score``
    is the fused RRF score, raised by ``neighbour_weight`` times the best adjacent turn's
    (``smooth_neighbours``), then multiplied by ``OTHER_SPEAKER`` for an item whose speaker is
    not one the query names, when it names any (``retrieval.question.subjects``; the dense
    channel then embeds the query as they would ask it, in the first person,
    ``question.as_speakers``), or, for a query in the first person that names no one ("where
    do I live?"), for a turn not in the user's role (``asks_about_the_user``), and by ``DATE_BOOST``
    for an item within a day of a date the query names (``question.dates``), then by time and
    chatter (``retrieval.timeline``: what stopped holding, for a question about the present or
    the past; small talk); ``Hit.ranks``
    holds each channel's rank (empty for a turn found only as the next turn of a candidate).
    Unless the query names a time, a second dense pass from the fused ranking's best
    ``feedback_docs`` items joins the fusion as the ``feedback`` channel (``retrieval.feedback``).
    No adjustment lifts an item above one both channels rank far higher (``retrieval.agreement``).
    ``Hit.parts`` says how each score was made: one part per channel that ranked the item, then
    one per adjustment, summing to the score (``retrieval.explain``).
    A query that joins names ("Jon and Gina") is asked once per name instead, and the lists are
    merged round-robin (``retrieval.decompose``), each hit noting the sub-query that found it.
    """
    asked = decompose(query)
    found = [
        _search_one(store, embedder, settings, q, cube_ids, filters, top_k, neighbour_weight)
        for q in asked
    ]
    if len(found) == 1:
        return found[0]
    noted_parts = [
        [noted(h, "decomposition", f"asked as '{q}'") for h in hits]
        for q, hits in zip(asked, found, strict=True)
    ]
    return interleave(noted_parts, top_k)


def _search_one(
    store: SearchIndex,
    embedder: Embedder,
    settings: Settings,
    query: str,
    cube_ids: Sequence[str],
    filters: Filters,
    top_k: int,
    neighbour_weight: float,
) -> list[Hit]:
    width = candidate_width(settings, top_k)
    with CLOCK.timed("question"):
        named = subjects(store, query, cube_ids)
        days = dates(query)
    with CLOCK.timed("embed"):
        vector = embedder.embed_query(as_speakers(query, named) if named else query)
    with CLOCK.timed("keyword"):
        keyword = store.keyword_search(
            query, cube_ids, filters, width, max_postings=settings.keyword_max_postings
        )
    with CLOCK.timed("dense"):
        dense = store.vector_search(vector, cube_ids, filters, width)
        spans = periods(query)
        dated = _dated(store, vector, cube_ids, filters, spans, width)
    fused = fuse_channels(keyword, dense, settings, dated)
    # A question that names a time is answered by that time's items (the dated channel); the
    # feedback pass would pull toward its first pass's topic at any time.
    if settings.feedback_docs > 0 and not spans:
        with CLOCK.timed("dense"):
            again = feedback_channel(store, vector, cube_ids, filters, fused,
                                     docs=settings.feedback_docs, width=width)  # fmt: skip
        fused = fuse_channels(keyword, dense, settings, dated, again)
    weights = channel_weights(settings)
    with CLOCK.timed("fetch"):
        fetched = store.get_items([item_id for item_id, _, _ in fused], cube_ids)
        items = {item.id: item for item in fetched}
    hits = [
        Hit(items[i], score, ranks, channel_parts(ranks, weights, settings.rrf_k))
        for i, score, ranks in fused
        if i in items
    ]
    places = {hit.item.id: n for n, hit in enumerate(hits, 1)}
    user = not named and asks_about_the_user(query)
    if neighbour_weight > 0:
        # The weighing below moves a score by at most this factor against another's.
        spread = (DATE_BOOST if days else 1.0) / (OTHER_SPEAKER if named or user else 1.0)
        with CLOCK.timed("neighbours"):
            hits = smooth_neighbours(store, hits, filters, neighbour_weight, keep=(top_k, spread))
    if named or days or user:
        hits = sorted(_weighed(hits, named, days, user), key=lambda h: -h.score)
    with CLOCK.timed("time"):
        hits = timeline.weigh(store, hits, timeline.tense(query), filters, places)
        hits = agreement.enforce(hits, places)
    return hits[:top_k]


def _dated(
    store: SearchIndex,
    vector: Vectors,
    cube_ids: Sequence[str],
    filters: Filters,
    spans: list[tuple[date, date]],
    width: int,
) -> list[tuple[str, float]]:
    """The dense ranking of the items within ``spans`` (and ``filters``): the days and months
    a query names (``question.periods``).

    A question that names a time asks about what happened then, but the words it shares with
    the answer may be few ("What did Nate do for Joanna on 25 May, 2022?"): among a whole
    cube's candidates that day's turns are often missing, and then no boost can raise them.
    """
    found: dict[str, float] = {}
    for first, last in spans:
        start = datetime.combine(first, time.min, timezone.utc)
        end = datetime.combine(last, time.max, timezone.utc)
        since = start if filters.since is None else max(start, filters.since)
        until = end if filters.until is None else min(end, filters.until)
        if since > until:
            continue
        window = replace(filters, since=since, until=until)
        for item_id, score in store.vector_search(vector, cube_ids, window, width):
            found[item_id] = max(score, found.get(item_id, score))
    return sorted(found.items(), key=lambda pair: -pair[1])[:width]


#: A question in the first person ("where do I live?") asks about the user who types it; one
#: that also says "you" may be about what the assistant said.
_FIRST_PERSON = re.compile(r"\b(?:i|me|my|mine|myself)\b", re.IGNORECASE)
_SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself)\b", re.IGNORECASE)


def asks_about_the_user(query: str) -> bool:
    """Whether ``query`` is in the first person and not the second ("where do I live?")."""
    return bool(_FIRST_PERSON.search(query)) and not _SECOND_PERSON.search(query)


def _weighed(
    hits: list[Hit], speakers: frozenset[str], days: list[date], user: bool = False
) -> Iterator[Hit]:
    """``hits`` with their scores multiplied by what the query says: ``OTHER_SPEAKER`` for
    an item not spoken by one of ``speakers`` (when there are any) or, with ``user`` (a query
    in the first person that names no one), for a turn not in the user's role (an assistant's
    reply); ``DATE_BOOST`` for one near one of ``days``."""
    for hit in hits:
        if speakers and not _spoken_by(hit.item, speakers):
            hit = scaled(hit, "speaker", OTHER_SPEAKER, "other speaker")
        elif user and hit.item.type == "turn" and hit.item.role not in (None, "user"):
            hit = scaled(hit, "speaker", OTHER_SPEAKER, "other speaker (the question says I)")
        if days and near(hit.item, days):
            hit = scaled(hit, "date", DATE_BOOST, "named day")
        yield hit


def _spoken_by(item: MemoryItem, speakers: frozenset[str]) -> bool:
    """Whether ``item`` is one of ``speakers``' (a derived item: about one of them) or is
    no one's (a document, a segment, a user's turn that names no speaker).

    A turn with no speaker but another role (an assistant's reply, a tool's result) is not
    theirs: it is someone else speaking, often *to* them ("Hello Alice, ..."), which is why
    it shares their name."""
    who = item.speaker or (item.metadata.get("subject") if item.tier == "long" else None)
    if who is None:
        return item.type != "turn" or item.role in (None, "user")
    return who in speakers


def smooth_neighbours(
    store: SearchIndex,
    hits: list[Hit],
    filters: Filters,
    weight: float,
    *,
    keep: tuple[int, float] | None = None,
) -> list[Hit]:
    """``hits`` re-ranked so that a turn gains ``weight`` × the score of its best adjacent turn.

    A question is answered by the next turn and an answer is named by the turn before it, so a
    turn next to a strong match is likely relevant even when its own words are not (on LoCoMo's
    development split, weight 0.6 puts all of a question's evidence in the top 27 fused hits
    for 0.754 of the questions instead of 0.686; docs/evaluation.md).  The next turn of a
    candidate joins the candidates when it passes ``filters``.  Adjacency is within a session,
    in ``event_time`` order (``Store.next_turns``); other items keep their score.  Best first.

    With ``keep = (k, spread)`` only the first ``k`` hits will be used, after their scores are
    moved by factors at most ``spread`` apart: a next turn that could not reach the first ``k``
    even so is not read from the store (most next turns of a large cube's candidates), and is
    left out.  The first ``k`` are the same as without ``keep``.

    Each gain is a ``neighbour`` part whose reason names the adjacent turn by its place in
    ``hits`` ("next turn of #2": this turn follows the 2nd; "turn before #5").
    """
    by_cube: dict[str, list[str]] = {}
    for hit in hits:
        if hit.item.type == "turn" and hit.item.session_id is not None:
            by_cube.setdefault(hit.item.cube_id, []).append(hit.item.id)
    following = {k: v for c, ids in by_cube.items() for k, v in store.next_turns(c, ids).items()}
    base = {hit.item.id: hit.score for hit in hits}
    known = {hit.item.id: hit for hit in hits}
    # each turn's best adjacent turn: its score, its id, whether it is the turn before
    best: dict[str, tuple[float, str, bool]] = {}
    # A turn joining from outside gains from the turn before it only (its own score is 0 and
    # what follows it is not read), so the known hits' smoothed scores do not depend on it.
    reach: dict[str, tuple[float, str, bool]] = {}
    for before, after in following.items():
        if after in known:
            if base[after] > best.get(before, _NONE)[0]:
                best[before] = (base[after], after, False)
            if base[before] > best.get(after, _NONE)[0]:
                best[after] = (base[before], before, True)
        elif weight * base[before] > reach.get(after, _NONE)[0]:
            reach[after] = (weight * base[before], before, True)
    smoothed = {i: base[i] + weight * best[i][0] if i in best else base[i] for i in known}
    if keep is not None and len(smoothed) >= keep[0]:
        k, spread = keep
        kth = sorted(smoothed.values(), reverse=True)[k - 1]
        reach = {i: got for i, got in reach.items() if got[0] * spread >= kth}
    # a next turn is of its turn's cube
    joining = [i for i in store.get_items(list(reach), list(by_cube)) if filters.matches(i)]
    place = {hit.item.id: n for n, hit in enumerate(hits, 1)}
    ranked = [
        adjusted(hit, "neighbour", smoothed[i], _beside(best[i], place)) if i in best else hit
        for i, hit in known.items()
    ]
    ranked += [
        joined(item, "neighbour", reach[item.id][0], _beside(reach[item.id], place))
        for item in joining
    ]
    return sorted(ranked, key=lambda h: -h.score)


#: No adjacent turn yet: any score beats it.
_NONE = (0.0, "", False)


def _beside(neighbour: tuple[float, str, bool], place: dict[str, int]) -> str:
    """Why a turn gained from ``neighbour`` (score, id, whether it is the turn before):
    "next turn of #N" or "turn before #N", N its place in the ranking smoothed."""
    _, other, before = neighbour
    return f"next turn of #{place[other]}" if before else f"turn before #{place[other]}"


#: Derived types whose hits are shown as the turns they came from (a segment keeps its summary).
EXPANDED_TYPES = ("fact", "profile", "preference", "knowledge")


def expand_to_sources(store: Store, hits: list[Hit]) -> list[Hit]:
    """Hits with each long-tier item replaced, in place, by the source turns it came from.

    A fact is a retrieval key: the words a question uses, in the third person; what answers it
    verbatim is the turn.  Each source keeps the item's score and ranks; duplicates (a turn
    found directly and through a fact) appear once, at their best rank.  A source's parts are
    the item's, then a zero-value ``source`` part naming it ("source of fact <id>").
    """
    derived = [h.item for h in hits if h.item.type in EXPANDED_TYPES]
    wanted = [s.item_id for item in derived for s in item.sources if s.item_id]
    # an item's sources are of its own cube
    cubes = list(dict.fromkeys(item.cube_id for item in derived))
    sources = {i.id: i for i in store.get_items(wanted, cubes)}

    def expanded(hit: Hit) -> list[Hit]:
        if hit.item.type not in EXPANDED_TYPES:
            return [hit]
        found = [sources[s.item_id] for s in hit.item.sources if s.item_id in sources]
        reason = f"source of {hit.item.type} {hit.item.id}"
        return [noted(hit, "source", reason, item) for item in found] or [hit]

    return _first_of_each(h for hit in hits for h in expanded(hit))


def expand_chain(
    store: Store, hits: list[Hit], speakers: frozenset[str] = frozenset()
) -> list[Hit]:
    """Hits with each turn followed by the next turn of its session (MemoryOS's dialogue chain).

    A turn that asks is often answered by the next one: on LoCoMo's development split this
    (with RRF k = 20) lifts evidence recall within 1000 tokens from 0.668 to 0.729
    (docs/evaluation.md).  With ``speakers`` (the people a query names) only their next turns
    are added: a reply by someone else is rarely the answer and costs as much budget.  The
    neighbour takes its turn's score, ranks and parts, then a zero-value ``chain`` part ("next
    turn of <id>"); a turn already present is not repeated.
    """
    turns: dict[str, list[str]] = {}
    for hit in hits:
        if hit.item.type == "turn" and hit.item.session_id is not None:
            turns.setdefault(hit.item.cube_id, []).append(hit.item.id)
    following = {
        k: v for cube, ids in turns.items() for k, v in store.next_turns(cube, ids).items()
    }
    neighbours = {i.id: i for i in store.get_items(list(set(following.values())), list(turns))}

    def chained(hit: Hit) -> list[Hit]:
        after = neighbours.get(following.get(hit.item.id, ""))
        if after is None or (speakers and not _spoken_by(after, speakers)):
            return [hit]
        return [hit, noted(hit, "chain", f"next turn of {hit.item.id}", after)]

    return _first_of_each(h for hit in hits for h in chained(hit))


def _first_of_each(hits: Iterable[Hit]) -> list[Hit]:
    """``hits`` in order, each item once (at its first, best-ranked, place)."""
    seen: set[str] = set()
    out = []
    for hit in hits:
        if hit.item.id not in seen:
            seen.add(hit.item.id)
            out.append(hit)
    return out
