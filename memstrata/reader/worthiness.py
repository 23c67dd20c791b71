"""Is a note worth keeping?  A small learned model.

Most sentences of a conversation are not worth a long-term note ("Keep rockin' it!"); some
are ("Melanie painted a lake sunrise last year").  A logistic regression decides, over

* cheap features of the sentence and its note (length, content words, first and second person,
  exclamation, names, dates…), and
* the note's vector from the cube's embedder, when the model was fitted with that embedder
  (``vectors`` model; otherwise the ``words`` model, cheap features only, is used).

The weights are data (``worthiness.json`` beside this module), fitted on the development split
of LoCoMo by ``memstrata eval fit-facts`` (labels: how well a note matches LoCoMo's own reference
observations, ``eval.facts.fit_models``); the file records how, from what, and the
cross-validated figures.
Fitting is here too (``fit``: L2-regularised logistic regression by Newton's method, numpy
only), so the model is reproducible without another dependency.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

MODEL_FILE = Path(__file__).with_name("worthiness.json")

_NAME = re.compile(r"(?<!^)(?<![.!?] )\b[A-Z][a-z]+")
_NUMBER = re.compile(r"\d")
_FIRST = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|myself)\b", re.I)
_SECOND = re.compile(r"\b(?:you|your|you're|you've|yours)\b", re.I)
_WE = re.compile(r"\b(?:we|our|us)\b", re.I)
_PAST = re.compile(r"\b\w+ed\b")
_CONTENT = re.compile(r"[A-Za-z0-9]{4,}")

#: The cheap features, in order (the model file lists them too, and is refused if they differ).
FEATURES = (
    "words", "sqrt_words", "long_words", "no_subject", "exclamations", "first_person",
    "second_person", "we", "dated", "names", "numbers", "past_tense", "ends_with_exclamation",
)  # fmt: skip


def cheap_features(sentence: str, note: str) -> list[float]:
    """The cheap features of one note (``FEATURES``, in order)."""
    words = len(note.split())
    return [
        words,
        words**0.5,
        len(_CONTENT.findall(note)),
        float(": " in note),
        sentence.count("!"),
        len(_FIRST.findall(sentence)),
        len(_SECOND.findall(sentence)),
        len(_WE.findall(sentence)),
        float("(" in note),
        len(_NAME.findall(sentence)),
        float(bool(_NUMBER.search(sentence))),
        len(_PAST.findall(sentence)),
        float(sentence.rstrip().endswith("!")),
    ]


#: The second stage's features (``among_peers``), in order.
PEER_FEATURES = ("logit", "log_rank", "rank_share", "z")


def among_peers(chances: npt.NDArray[np.float64], groups: list[Any]) -> npt.NDArray[np.float64]:
    """Where each note stands among its peers (the notes of the same ``groups`` key: one
    speaker in one session): the first stage's logit, log(1 + its rank among them), that rank
    over their number, and its z-score among them (``PEER_FEATURES``)."""
    members: dict[Any, list[int]] = {}
    for i, key in enumerate(groups):
        members.setdefault(key, []).append(i)
    rank, share, z = (np.zeros(len(chances)) for _ in range(3))
    for rows in members.values():
        own = chances[rows]
        order = np.argsort(-own, kind="stable")
        for place, j in enumerate(order):
            rank[rows[j]] = place
            share[rows[j]] = place / len(rows)
        z[rows] = (own - own.mean()) / (own.std() + 1e-6)
    clipped = np.clip(chances, 1e-9, 1 - 1e-9)
    logit = np.log(clipped / (1 - clipped))
    return np.column_stack([logit, np.log1p(rank), share, z]).astype(np.float64)


@dataclass(frozen=True)
class Model:
    """A fitted logistic regression over standardised features, and optionally a second one
    (``peers``) over where each note's first probability stands among its peers'."""

    embedder: str | None  # fingerprint whose vectors are features, or None: cheap features only
    mean: npt.NDArray[np.float64]
    scale: npt.NDArray[np.float64]
    coef: npt.NDArray[np.float64]
    intercept: float
    threshold: float
    peers: Model | None = None

    def probabilities(self, features: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """P(worth keeping) of each row of ``features`` (cheap features, then the vector), by
        this regression alone."""
        z = ((features - self.mean) / self.scale) @ self.coef + self.intercept
        return 1.0 / (1.0 + np.exp(-z))

    def chances(
        self, features: npt.NDArray[np.float64], groups: list[Any]
    ) -> npt.NDArray[np.float64]:
        """P(worth keeping) of each note, both stages: ``groups`` keys the notes' peers (see
        ``among_peers``); what ``threshold`` applies to."""
        first = self.probabilities(features)
        return first if self.peers is None else self.peers.probabilities(among_peers(first, groups))

    def as_dict(self) -> dict[str, Any]:
        def rounded(values: npt.NDArray[np.float64]) -> list[float]:
            return [float(f"{v:.6g}") for v in values]

        found: dict[str, Any] = {"embedder": self.embedder, "mean": rounded(self.mean),
                 "scale": rounded(self.scale), "coef": rounded(self.coef),
                 "intercept": self.intercept, "threshold": self.threshold}  # fmt: skip
        if self.peers is not None:
            found["peers"] = self.peers.as_dict()
        return found

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Model:
        return cls(
            embedder=data["embedder"],
            mean=np.asarray(data["mean"], np.float64),
            scale=np.asarray(data["scale"], np.float64),
            coef=np.asarray(data["coef"], np.float64),
            intercept=float(data["intercept"]),
            threshold=float(data["threshold"]),
            peers=None if data.get("peers") is None else Model.from_dict(data["peers"]),
        )


@dataclass(frozen=True)
class Worthiness:
    """The shipped models: ``words`` (any embedder) and ``vectors`` (one embedder's)."""

    words: Model
    vectors: Model | None

    def model_for(self, embedder: str | None) -> Model:
        """The ``vectors`` model when ``embedder`` is the one it was fitted with, else ``words``."""
        if self.vectors is not None and embedder == self.vectors.embedder:
            return self.vectors
        return self.words


@cache
def shipped() -> Worthiness:
    """The models in ``worthiness.json`` (read once)."""
    return load(MODEL_FILE)


def load(path: Path) -> Worthiness:
    data = json.loads(path.read_text(encoding="utf-8"))
    if tuple(data["features"]) != FEATURES:
        raise ValueError(f"{path} was fitted with other features; refit it")
    vectors = data["models"].get("vectors")
    return Worthiness(
        words=Model.from_dict(data["models"]["words"]),
        vectors=None if vectors is None else Model.from_dict(vectors),
    )


def fit(
    features: npt.NDArray[np.float64], labels: npt.NDArray[np.floating], l2: float = 50.0
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64], float]:
    """Mean, scale, coefficients and intercept of an L2-regularised logistic regression
    (the intercept is not penalised), by Newton's method on standardised features.
    ``labels`` are targets in [0, 1]: booleans, or soft labels (cross-entropy either way)."""
    mean = features.mean(axis=0)
    scale = features.std(axis=0)
    scale[scale == 0] = 1.0
    x = np.hstack([(features - mean) / scale, np.ones((len(features), 1))])
    y = labels.astype(np.float64)
    w = np.zeros(x.shape[1])
    penalty = np.full(x.shape[1], l2)
    penalty[-1] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        gradient = x.T @ (p - y) + penalty * w
        hessian = (x * (p * (1 - p))[:, None]).T @ x + np.diag(penalty) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return mean, scale, w[:-1], float(w[-1])
