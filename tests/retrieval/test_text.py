from __future__ import annotations

from memstrata.text import any_of, index_text, phrase, query_terms


def test_cjk_runs_are_indexed_as_characters_and_bigrams() -> None:
    body = index_text("我喜欢吃苹果 ok")
    tokens = body.split()
    assert {"我", "苹", "喜欢", "苹果", "ok"} <= set(tokens)
    assert "我喜欢吃苹果" not in tokens


def test_query_cjk_becomes_bigrams_and_english_drops_stopwords() -> None:
    assert query_terms("喜欢吃") == ["喜欢", "欢吃"]
    assert query_terms("苹") == ["苹"]
    assert query_terms("What is the name of the dog?") == ["name", "dog"]
    assert query_terms("who is it") == ["who", "is", "it"]  # all stopwords: keep them
    assert query_terms("Maya's dog") == ["maya", "dog"]


def test_phrases_are_quoted_so_query_syntax_is_inert() -> None:
    assert phrase('say "hi"') == '"say ""hi"""'
    assert any_of(["a-b", "NEAR(x)"]) == '("a-b" OR "NEAR(x)")'
    assert query_terms("?!") == []


def test_index_terms_carry_the_cube_prefix() -> None:
    from memstrata.text import cube_prefix, index_body

    prefix = cube_prefix("notes")
    assert len(prefix) == 6 and prefix.isalpha() and prefix.islower()
    assert cube_prefix("notes") == prefix != cube_prefix("other")
    assert index_body("Café 北京", "notes").split() == [
        prefix + "Café",
        prefix + "北",
        prefix + "京",
        prefix + "北京",
    ]
