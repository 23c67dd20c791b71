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
