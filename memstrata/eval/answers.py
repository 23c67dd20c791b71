"""Answers from a packed context, scored against the gold answer: token F1 and BLEU-1.

LoCoMo's published numbers score a model's short answer with token F1 (SQuAD's: lower case,
punctuation and the articles a/an/the removed, bag of tokens) and BLEU-1 (clipped unigram
precision times the brevity penalty, on the same tokens).  ``answer`` asks a model the question
with the context as its only memory; the model is the ``LLM`` Protocol (``memstrata.llm``), so
any OpenAI-compatible endpoint or the local model serves.  ``choose`` asks it to pick one of
lettered options instead (PrefEval's multiple-choice variant).
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Sequence

from memstrata.llm.base import LLM, ChatMessage

PROMPT = """Below are memories of a conversation, one per line, each with its date and \
speaker. Answer the question from them in a short phrase (a few words, no full sentence); \
when the question asks when, give the date. If the memories do not hold the answer, give \
your best guess from them.

# Memories
{context}"""

CHOICE_PROMPT = """Below are memories of your conversations with the user, one per line, \
each with its date and speaker. The user asks a question; pick the option that suits them \
best, given what the memories say about them. Answer with the option's letter only.

# Memories
{context}"""

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalise(text: str) -> list[str]:
    """``text`` as scoring tokens: lower case, no punctuation, no articles, split on spaces."""
    return _ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split()


#: Words that carry no content: left out of ``token_recall``.
_FUNCTION_WORDS = frozenset(
    """a an and are as at be been but by did do does for from had has have he her him his i in
    is it its me my of on or our she so that the their them they this to was we were what when
    where which who will with would you your""".split()
)


def content_words(text: str) -> set[str]:
    """The content words of ``text``: its scoring tokens without function words."""
    return {t for t in normalise(text) if t not in _FUNCTION_WORDS}


def token_recall(gold: str, context: str) -> float | None:
    """The share of ``gold``'s content words found among ``context``'s tokens, in [0, 1];
    None when ``gold`` has no content word (nothing to find)."""
    wanted = content_words(gold)
    if not wanted:
        return None
    return len(wanted & set(normalise(context))) / len(wanted)


def f1(prediction: str, gold: str) -> float:
    """Token F1 of ``prediction`` against ``gold`` in [0, 1] (1 when both are empty)."""
    pred, ref = normalise(prediction), normalise(gold)
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def bleu1(prediction: str, gold: str) -> float:
    """BLEU-1 of ``prediction`` against the one reference ``gold``, in [0, 1]: clipped unigram
    precision × brevity penalty ``exp(1 - r/c)`` when the prediction is shorter."""
    pred, ref = normalise(prediction), normalise(gold)
    if not pred or not ref:
        return float(pred == ref)
    precision = sum((Counter(pred) & Counter(ref)).values()) / len(pred)
    penalty = 1.0 if len(pred) > len(ref) else math.exp(1 - len(ref) / len(pred))
    return precision * penalty


def messages(question: str, context: str) -> list[ChatMessage]:
    """The chat that asks ``question`` with ``context`` (a packed context's text) as memory."""
    memory = context.strip() or "(none)"
    return [
        {"role": "system", "content": PROMPT.format(context=memory)},
        {"role": "user", "content": question},
    ]


def answer(llm: LLM, question: str, context: str, max_tokens: int = 64) -> str:
    """The model's short answer to ``question`` from ``context`` (first line, trimmed).

    Raises ``LLMError`` when the model cannot be reached or answers nonsense at the transport.
    """
    text = llm.complete(messages(question, context), max_tokens=max_tokens).text
    return text.strip().splitlines()[0].strip() if text.strip() else ""


def choose(llm: LLM, question: str, options: Sequence[str], context: str) -> int | None:
    """The index in ``options`` (shown lettered A, B, …) of the one the model picks for
    ``question`` from ``context``; None when its answer names no option's letter.  More than 26
    options is a ``ValueError``.

    Raises ``LLMError`` when the model cannot be reached.
    """
    letters = string.ascii_uppercase[: len(options)]
    listed = "\n".join(
        f"{letter}. {option}" for letter, option in zip(letters, options, strict=True)
    )
    chat: list[ChatMessage] = [
        {"role": "system", "content": CHOICE_PROMPT.format(context=context.strip() or "(none)")},
        {"role": "user", "content": f"{question}\n\n{listed}"},
    ]
    said = llm.complete(chat, max_tokens=8).text
    picked = re.search(rf"\b([{letters}])\b", said) if letters else None
    return None if picked is None else letters.index(picked.group(1))
