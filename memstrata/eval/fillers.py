"""Filler turns: the conversation that stands between a stated preference and its question.

Two sources, both deterministic:

* ``chit_chat(n)``: synthetic small talk, the user telling of neighbours, errands and chores and
  the assistant answering, each exchange different (7 people × 11 happenings × 5 times of day);
  no turn states a taste, so the only preference a cube holds is the one measured;
* ``locomo_turns(samples)``: LoCoMo's dialogue in order, its first speaker as the user and the
  other as the assistant (two friends telling of their lives, tastes included: distractors).
  LoCoMo is CC BY-NC: read it where it lies, never copy it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from memstrata.eval.locomo import sessions

Role = Literal["user", "assistant"]
#: One turn of a conversation: who speaks, and what they say.
Turn = tuple[Role, str]

_PEOPLE = ("my neighbour", "my cousin", "a colleague", "the postman", "my landlord",
           "an old school friend", "the man at the hardware shop")  # fmt: skip
_HAPPENINGS = (
    "fixed the squeaky garden gate", "lost the car keys again", "repainted the hallway",
    "finished a thousand-piece jigsaw", "signed up for a first-aid course",
    "found a wallet on the bus", "moved the piano upstairs", "organised the whole garage",
    "missed the last train home", "baked bread for the first time", "rescued a kite from a tree",
)  # fmt: skip
_TIMES = ("this morning", "yesterday", "last weekend", "on Tuesday", "after lunch")
_ASIDES = ("It took longer than anyone expected.", "Everyone laughed about it afterwards.",
           "The weather did not help at all.", "Nobody had the right tools for it.",
           "It was the talk of the street for a day.", "I only heard about it later.")  # fmt: skip
_REPLIES = ("How did it end?", "I hope it all went well.", "Did anyone help out?",
            "That will be remembered for a while.", "What made them do that?",
            "At least there is a story to tell now.")  # fmt: skip


def chit_chat(n: int) -> list[Turn]:
    """``n`` turns of synthetic small talk, the user's and the assistant's in turn (user first);
    the first ``m`` of ``chit_chat(n)`` are ``chit_chat(m)``.  No two alike for ``n`` up to 770."""
    turns: list[Turn] = []
    for k in range((n + 1) // 2):
        who = _PEOPLE[k % len(_PEOPLE)]
        said = f"{who[0].upper()}{who[1:]} {_HAPPENINGS[k % len(_HAPPENINGS)]} "
        said += f"{_TIMES[k % len(_TIMES)]}. {_ASIDES[k % len(_ASIDES)]}"
        echo = f"So {who} {_HAPPENINGS[k % len(_HAPPENINGS)]}? {_REPLIES[k % len(_REPLIES)]}"
        turns += [("user", said), ("assistant", echo)]
    return turns[:n]


def locomo_turns(samples: Sequence[dict[str, Any]]) -> list[Turn]:
    """Every turn of LoCoMo ``samples`` (``locomo.load``), sample by sample, session by session:
    ``speaker_a``'s as the user's, the other's as the assistant's (image captions kept)."""
    turns: list[Turn] = []
    for sample in samples:
        first = sample["conversation"].get("speaker_a")
        for _, messages in sessions(sample["conversation"]):
            turns += [("user" if m["name"] == first else "assistant", m["content"])
                      for m in messages]  # fmt: skip
    return turns
