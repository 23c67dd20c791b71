"""``memstrata eval …``: measure memstrata on benchmark data (``memstrata.eval``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from memstrata.cli.app import emit, options
from memstrata.config import Settings
from memstrata.eval import locomo
from memstrata.llm import make_llm


@click.group(name="eval")
def eval_group() -> None:
    """Measure memstrata on benchmark data."""


@eval_group.command("locomo")
@click.option(
    "--data", required=True, type=click.Path(exists=True, dir_okay=False), help="LoCoMo JSON file."
)
@click.option(
    "--tiers/--no-tiers",
    default=True,
    show_default=True,
    help="Consolidate into tiers, or keep every turn in the working tier (raw-turn search).",
)
@click.option("--conversations", type=click.IntRange(min=1), help="Only the first N samples.")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the result as JSON here.")
@click.option(
    "--llm-provider",
    type=click.Choice(["none", "openai", "local"]),
    help="Chat model that answers each question from its context, scored by F1 and BLEU-1 "
    "(default: the configured llm_provider; none: recall only).",
)
@click.option("--llm-base-url", help="OpenAI-compatible base URL (…/v1) of that model.")
@click.option("--llm-model", help="Model name at that endpoint.")
def eval_locomo(
    data: str,
    tiers: bool,
    conversations: int | None,
    out: str | None,
    llm_provider: str | None,
    llm_base_url: str | None,
    llm_model: str | None,
) -> None:
    """Evidence recall of search and packed contexts on LoCoMo, by category; with a chat
    model, also F1 and BLEU-1 of its answers."""
    given = options()
    try:
        samples = locomo.load(data)[:conversations]
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    chosen = {"llm_provider": llm_provider, "llm_base_url": llm_base_url, "llm_model": llm_model}
    llm_settings: dict[str, Any] = {k: v for k, v in chosen.items() if v is not None}
    llm = make_llm(Settings.load(given.config, **llm_settings))
    try:
        result = locomo.evaluate(
            samples,
            lambda path: given.open(path, workers=1),
            cube_settings={} if tiers else {"working_capacity": 10_000},
            llm=llm,
        )
    finally:
        if llm is not None:
            llm.close()
    if out:
        Path(out).write_text(json.dumps(result, indent=2), encoding="utf-8")
    emit(result, locomo.table(result))
