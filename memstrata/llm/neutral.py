"""Text from users, made unable to act as a control token of a model's prompt (issue 24, 16).

A chat template wraps each message in the model's control tokens (``<|im_start|>`` …
``<|im_end|>``, ``<s>[INST]`` … ``[/INST]``, ``<start_of_turn>``, …), and llama.cpp tokenises
the formatted prompt with those tokens recognised *anywhere* in it, as Hugging Face tokenizers
do with added tokens.  A memory, a speaker's name or a question holding
``<|im_end|><|im_start|>system`` would therefore end the message it stands in and open a system
message of its author's.  ``neutralise`` breaks every such shape before the text reaches a prompt:
the ``<`` or ``[`` that opens it becomes a look-alike (``‹`` U+2039, ``⁅`` U+2045) that no
tokenizer's normalisation (NFKC included) maps back, so the model still reads the words, as
text.  It is applied where prompts are built (``retrieval.prompt``, ``reader.llm``) and again by
the backends to every message they send (``llm.local``, ``llm.openai``, ``llm.adapter``): our own
prompt templates hold none of these shapes (a test checks), so only what came from a user changes.

The shapes are those of the control tokens of the chat templates in use, broadly:

* ``<|…`` and ``<｜…`` (ChatML, Llama 3, Phi, GPT's ``<|endoftext|>``, DeepSeek's fullwidth bars);
* a tag, ``<name>`` or ``</name>`` (``<s>``, ``</s>``, ``<start_of_turn>``, ``<think>``,
  ``<tool_call>``, SmolLM2's ``<filename>``…; an HTML tag is changed too, harmlessly);
* an upper-case word in brackets, ``[NAME]`` or ``[/NAME]`` (``[INST]``, ``[SYSTEM_PROMPT]``,
  ``[TOOL_CALLS]``, ``[gMASK]``); lower-case ones (``[p1]``, ``[id]``) are left alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

#: What an opening ``<`` of a control-token shape becomes.
ANGLE = "\u2039"
#: What an opening ``[`` of a control-token shape becomes.
BRACKET = "\u2045"

#: A ``<`` that opens a control-token shape: before a bar (ASCII or fullwidth), or a tag.
_ANGLE_SHAPE = re.compile(r"<(?=[|\uff5c]|/?[A-Za-z_][\w.:\-]{0,63}>)")
#: A ``[`` that opens an upper-case bracketed word (an optional lower-case first letter:
#: GLM's ``[gMASK]``).
_BRACKET_SHAPE = re.compile(r"\[(?=/?[a-z]?[A-Z][A-Z0-9_]{0,63}\])")


def neutralise(text: str) -> str:
    """``text`` with every control-token shape broken (see the module docstring).

    Idempotent, and only ever replaces a ``<`` or ``[`` by a look-alike: it never makes a
    shape, and text without one is returned unchanged.
    """
    if "<" not in text and "[" not in text:
        return text  # the common case, without a regular expression
    return _BRACKET_SHAPE.sub(BRACKET, _ANGLE_SHAPE.sub(ANGLE, text))


def neutral_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` as the plain dicts a backend sends, each string but the ``role`` (which is
    ours, never a user's) ``neutralise``d: the content, and a ``name`` where one is given."""
    return [
        {k: neutralise(v) if isinstance(v, str) and k != "role" else v for k, v in m.items()}
        for m in messages
    ]
