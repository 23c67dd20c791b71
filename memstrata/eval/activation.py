"""``memstrata bench activation``: time to first token with and without a cube's KV cache.

For stable contexts of about 300, 1,000 and 2,000 tokens (long-tier lines as ``memory.activation``
renders them), the local model answers the same question from the same prompt twice per round:
**cold** (its cache emptied first: it reads the whole prompt) and **cached** (it starts from the
prefilled state, read back from the artifact file as a chat would, and reads only the rest).
Time to first token is measured from the call to the first piece of the answer, the state's
loading included; the median of ``rounds`` is reported, and whether the two answers (greedy,
temperature 0) were identical every time.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memstrata.llm.local import Activation, LocalChat
from memstrata.memcube import Artifact
from memstrata.memory.activation import FORMAT, encode, read_state
from memstrata.retrieval.pack import Context
from memstrata.retrieval.prompt import chat_messages, prefill_messages
from memstrata.text import count_tokens

#: Stable context sizes measured (tokens, as the packed context counts them).
SIZES = (300, 1000, 2000)
#: The size the headline keys (``ttft_ms_cold`` …) are taken from.
HEADLINE = 1000
QUESTION = "Which city does Ann's sister live in?"
_PLACES = ("Lisbon", "Oslo", "Kyoto", "Quito", "Accra", "Hobart", "Tartu", "Cusco", "Fez", "Perth")
_DOINGS = ("took a pottery class", "ran a half marathon", "adopted a cat", "read a novel",
           "baked sourdough", "visited a museum", "planted tomatoes", "fixed a bicycle")  # fmt: skip


def stable_text(tokens: int) -> str:
    """Long-tier lines (dated facts about Ann) adding up to about ``tokens`` tokens."""
    lines = ["ann's sister is Lea", "Lea lives in Munich"]
    n = 0
    while count_tokens("\n".join(lines)) < tokens:
        place, doing = _PLACES[n % len(_PLACES)], _DOINGS[n % len(_DOINGS)]
        day = f"2024-{n % 12 + 1:02d}-{n % 28 + 1:02d}"
        lines.append(f"[{day}] Ann (fact): Ann {doing} in {place} with a friend from work.")
        n += 1
    return "\n".join(lines[:-1] if count_tokens("\n".join(lines)) > tokens else lines)


def measure(
    model_path: str | None = None,
    *,
    sizes: Sequence[int] = SIZES,
    rounds: int = 3,
    threads: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """The benchmark's result (see the module docstring): per size, the model tokens of the
    stable context, the artifact's bytes, the prefill time, cold and cached TTFT and total time
    (ms, medians), and whether the answers matched; the headline keys for ``HEADLINE``."""
    chat = LocalChat(model_path, threads=threads)
    now = datetime(2024, 12, 1, tzinfo=timezone.utc)
    context = Context("[2024-11-30] Ann: I talked to Lea on the phone today.", 14, 1000)
    runs: dict[str, Any] = {}
    total = len(sizes) * rounds
    if progress is not None:
        progress(0, total)
    try:
        with tempfile.TemporaryDirectory(prefix="memstrata-bench-") as folder:
            for size in sizes:
                stable = stable_text(size)
                messages = chat_messages(QUESTION, context, now, stable)
                started = time.perf_counter()
                prefilled = chat.prefill(prefill_messages(stable))
                prefill_ms = (time.perf_counter() - started) * 1000
                artifact = _saved(Path(folder), size, prefilled)
                cold, cached, same = [], [], True
                for _ in range(rounds):
                    chat.forget()
                    cold.append(_timed(chat, messages, None))
                    chat.forget()  # a chat reads the state from its file each time
                    cached.append(_timed(chat, messages, artifact))
                    same = same and cold[-1][2] == cached[-1][2]
                    if progress is not None:
                        progress(1, total)
                runs[str(size)] = {
                    "stable_tokens_counted": count_tokens(stable),
                    "model_tokens": len(prefilled.tokens),
                    "state_bytes": len(prefilled.state),
                    "prefill_ms": round(prefill_ms, 1),
                    "ttft_ms_cold": _median(c[0] for c in cold),
                    "ttft_ms_cached": _median(c[0] for c in cached),
                    "total_ms_cold": _median(c[1] for c in cold),
                    "total_ms_cached": _median(c[1] for c in cached),
                    "same_answer": same,
                    "answer": cold[-1][2],
                }
    finally:
        chat.close()
    result: dict[str, Any] = {"model": chat.model, "rounds": rounds, "by_size": runs}
    head = runs.get(str(HEADLINE))
    if head is not None:
        result["ttft_ms_cold"] = head["ttft_ms_cold"]
        result["ttft_ms_cached"] = head["ttft_ms_cached"]
        result["ttft_speedup"] = round(head["ttft_ms_cold"] / max(head["ttft_ms_cached"], 1e-6), 2)
        result["same_answer"] = all(r["same_answer"] for r in runs.values())
    return result


def table(result: dict[str, Any]) -> list[str]:
    """``result`` as lines of text: one per stable context size."""
    lines = [f"model {result['model']}, median of {result['rounds']} rounds",
             "stable tokens (model)  state MB  prefill ms  TTFT cold ms  TTFT cached ms  "
             "speed-up  same answer"]  # fmt: skip
    for size, run in result["by_size"].items():
        speedup = run["ttft_ms_cold"] / max(run["ttft_ms_cached"], 1e-6)
        lines.append(
            f"{size:>6} ({run['model_tokens']:>5})  {run['state_bytes'] / 1e6:8.1f}  "
            f"{run['prefill_ms']:10.1f}  {run['ttft_ms_cold']:12.1f}  "
            f"{run['ttft_ms_cached']:14.1f}  {speedup:7.1f}×  {run['same_answer']}"
        )
    return lines


def _saved(folder: Path, size: int, prefilled: Activation) -> Artifact:
    """``prefilled`` written as a ``kv_cache`` file, the way ``memory.activation`` stores it."""
    path = folder / f"kv-{size}"
    path.write_bytes(encode({"format": FORMAT, "tokens": list(prefilled.tokens)}, prefilled.state))
    return Artifact(f"bench-{size}", "kv_cache", "bench", path)


def _timed(
    chat: LocalChat, messages: list[Any], artifact: Artifact | None
) -> tuple[float, float, str]:
    """(ms to the first piece, ms to the last, the answer) of one streamed answer, from
    ``artifact``'s state (read from its file within the time) or from nothing."""
    started = time.perf_counter()
    activation = None if artifact is None else read_state(artifact)
    first: float | None = None
    pieces = []
    for piece in chat.stream(messages, max_tokens=32, activation=activation):
        if first is None:
            first = time.perf_counter()
        pieces.append(piece)
    done = time.perf_counter()
    return ((first or done) - started) * 1000, (done - started) * 1000, "".join(pieces)


def _median(values: Iterable[float]) -> float:
    return round(float(statistics.median(list(values))), 1)
