"""The worthiness model: fitting works, the shipped file loads and picks by embedder."""

from __future__ import annotations

import numpy as np

from memstrata.reader import worthiness


def test_fit_separates_a_learnable_problem() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 3))
    y = x[:, 0] - 2 * x[:, 2] > 0
    mean, scale, coef, intercept = worthiness.fit(x, y, l2=1.0)
    model = worthiness.Model(None, mean, scale, coef, intercept, 0.5)
    accuracy = float(((model.probabilities(x) >= 0.5) == y).mean())
    assert accuracy > 0.95
    assert coef[0] > 0 > coef[2] and abs(coef[1]) < abs(coef[0])


def test_shipped_models_load_and_are_chosen_by_embedder() -> None:
    shipped = worthiness.shipped()
    assert shipped.vectors is not None and shipped.vectors.embedder
    assert shipped.model_for(shipped.vectors.embedder) is shipped.vectors
    assert shipped.model_for("another/384") is shipped.words
    assert len(shipped.words.coef) == len(worthiness.FEATURES)
    cheap = np.array([worthiness.cheap_features("I adopted a cat.", "Ann adopted a cat.")])
    assert 0 < float(shipped.words.probabilities(cheap)[0]) < 1
    assert shipped.vectors.peers is not None  # the second stage helped it out of fold
    assert len(shipped.vectors.peers.coef) == len(worthiness.PEER_FEATURES)


def test_a_note_is_weighed_against_its_peers() -> None:
    chances = np.array([0.9, 0.5, 0.1, 0.5])
    features = worthiness.among_peers(chances, ["a", "a", "a", "b"])
    assert np.allclose(features[:, 1], [0.0, np.log(2), np.log(3), 0.0])  # log(1 + rank)
    assert np.allclose(features[:, 2], [0.0, 1 / 3, 2 / 3, 0.0])  # rank over the group's size
    assert features[3, 3] == 0.0 and features[0, 3] > 0 > features[2, 3]  # z-score in group
    # A second stage that prefers the first of its group keeps the same 0.5 note in "b" (alone)
    # and drops it in "a" (second of three).
    first = worthiness.Model(None, np.zeros(1), np.ones(1), np.ones(1), 0.0, 0.5)
    second = worthiness.Model(None, np.zeros(4), np.ones(4), np.array([0, -4.0, 0, 0]), 1.0, 0.5)
    model = worthiness.Model(None, np.zeros(1), np.ones(1), np.ones(1), 0.0, 0.5, peers=second)
    logits = np.log(chances / (1 - chances))[:, None]
    assert first.chances(logits, ["a", "a", "a", "b"]).round(3).tolist() == chances.tolist()
    kept = model.chances(logits, ["a", "a", "a", "b"]) >= 0.5
    assert kept.tolist() == [True, False, False, True]
    again = worthiness.Model.from_dict(model.as_dict())
    assert again.peers is not None and again.peers.coef.tolist() == [0, -4.0, 0, 0]
