from __future__ import annotations

from pathlib import Path

import pytest

from memstrata.config import Settings
from memstrata.errors import ConfigurationError


def test_defaults_toml_env_and_overrides_in_order(tmp_path: Path) -> None:
    toml = tmp_path / "m.toml"
    toml.write_text('[memstrata]\ndb = "from-toml.db"\nrrf_k = 10\nembedder = "use"\n')
    env = {"MEMSTRATA_CONFIG": str(toml), "MEMSTRATA_RRF_K": "20"}
    s = Settings.load(environ=env, embedder="minilm")
    assert (s.db, s.rrf_k, s.embedder) == ("from-toml.db", 20, "minilm")
    assert Settings.load(environ={}).db.endswith("memstrata.db")
    assert Settings.load(environ={}).embedder is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MEMSTRATA_RRF_K": "many"}, "rrf_k"),
        ({"MEMSTRATA_CONFIG": "/nonexistent/m.toml"}, "cannot read"),
    ],
)
def test_bad_settings_are_configuration_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Settings.load(environ=env)


def test_unknown_setting_names_the_known_ones(tmp_path: Path) -> None:
    toml = tmp_path / "m.toml"
    toml.write_text("colour = 'blue'\n")
    with pytest.raises(ConfigurationError, match="colour") as info:
        Settings.load(config=toml, environ={})
    assert "rrf_k" in str(info.value)


@pytest.mark.parametrize(("name", "value"), [("rrf_k", "-5"), ("keyword_weight", "nan"),
                                             ("search_candidates", "0")])  # fmt: skip
def test_every_settings_keeps_the_runtime_ranges(name: str, value: str) -> None:
    """A value ``configure`` refuses never starts either (``rrf_k=-5`` from the environment
    started, and gave negative scores)."""
    with pytest.raises(ConfigurationError, match=f"{name} must be from"):
        Settings.load(environ={f"MEMSTRATA_{name.upper()}": value})
    with pytest.raises(ConfigurationError, match=f"{name} must be from"):
        Settings.from_mapping({name: value})
