"""``memstrata eval …``: measure memstrata on benchmark data (``memstrata.eval``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from memstrata.cli.app import emit, options
from memstrata.cli.progress import progress_bar
from memstrata.config import Settings
from memstrata.embed import DEFAULT_EMBEDDER, make_embedder
from memstrata.eval import facts, locomo, report
from memstrata.llm import make_llm

_DATA = click.option(
    "--data", required=True, type=click.Path(exists=True, dir_okay=False), help="LoCoMo JSON file."
)


@click.group(name="eval")
def eval_group() -> None:
    """Measure memstrata on benchmark data."""


@eval_group.command("locomo")
@_DATA
@click.option(
    "--tiers/--no-tiers",
    default=True,
    show_default=True,
    help="Consolidate into tiers, or keep every turn in the working tier (raw-turn search).",
)
@click.option("--conversations", type=click.IntRange(min=1), help="Only the first N samples.")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the result as JSON here.")
@click.option(
    "--report",
    "report_dir",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Also write an HTML report (DIR/index.html) and the result (DIR/result.json) here.",
)
@click.option(
    "--llm-provider",
    type=click.Choice(["none", "openai", "local"]),
    help="Chat model that answers each question from its context, scored by F1 and BLEU-1 "
    "(default: the configured llm_provider; none: recall only).",
)
@click.option("--llm-base-url", help="OpenAI-compatible base URL (…/v1) of that model.")
@click.option("--llm-model", help="Model name at that endpoint.")
@click.option(
    "--facts",
    "check_facts",
    is_flag=True,
    help="Measure the long tier against LoCoMo's reference observations instead (observation "
    "recall and precision).",
)
def eval_locomo(
    data: str,
    tiers: bool,
    conversations: int | None,
    out: str | None,
    report_dir: str | None,
    llm_provider: str | None,
    llm_base_url: str | None,
    llm_model: str | None,
    check_facts: bool,
) -> None:
    """Evidence recall of search and packed contexts on LoCoMo, by category; with a chat
    model, also F1 and BLEU-1 of its answers; with --facts, the long tier's notes against
    LoCoMo's reference observations."""
    if check_facts and report_dir:
        raise click.UsageError("--report draws recall results; --facts has none")
    given = options()
    samples = _samples(data, conversations)
    settings: dict[str, Any] = {} if tiers else {"working_capacity": 10_000,
                                                 "session_idle_hours": 0}  # fmt: skip
    if check_facts:
        found = facts.evaluate(samples, lambda path: given.open(path, workers=1), settings)
        _write(out, found)
        emit(found, facts.table(found))
        return
    chosen = {"llm_provider": llm_provider, "llm_base_url": llm_base_url, "llm_model": llm_model}
    llm_settings: dict[str, Any] = {k: v for k, v in chosen.items() if v is not None}
    llm = make_llm(Settings.load(given.config, **llm_settings))
    try:
        # A bar on a terminal: turns ingested and questions asked.
        with progress_bar("LoCoMo") as progress:
            result = locomo.evaluate(
                samples,
                lambda path: given.open(path, workers=1),
                cube_settings=settings,
                llm=llm,
                progress=progress,
            )
    finally:
        if llm is not None:
            llm.close()
    _write(out, result)
    emit(result, locomo.table(result))
    if report_dir:  # last: a folder that cannot be written loses nothing else
        name = f"{Path(data).name}, {'tiers' if tiers else 'no tiers'}"
        _report([report.Run(name, result)], report_dir, result)


@eval_group.command("report")
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--out",
    required=True,
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Folder of the report: its index.html is written (the folder made if missing).",
)
def eval_report(results: tuple[str, ...], out: str) -> None:
    """Draw an HTML report of one or more results of `eval locomo` (their --out files), side
    by side, without running anything."""
    try:
        runs = [report.load(path) for path in results]
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    page = _report(runs, out)
    emit({"report": str(page), "runs": [run.name for run in runs]}, [f"wrote {page}"])


@eval_group.command("fit-facts")
@_DATA
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False),
    help="Write the models here (the shipped file is memstrata/reader/worthiness.json).",
)
def eval_fit_facts(data: str, out: str) -> None:
    """Fit the offline reader's worthiness models on LoCoMo's reference observations."""
    given = options()
    samples = _samples(data, None)
    settings = given.settings()
    # The embedder of a new database: the one the vectors model's features come from.
    embedder = make_embedder(settings.embedder or DEFAULT_EMBEDDER, settings)
    fitted = facts.fit_models(samples, embedder, data)
    Path(out).write_text(json.dumps(fitted, indent=1) + "\n", encoding="utf-8")
    lines = []
    for name, model in fitted["models"].items():
        figures = dict(model["cross_validated"])
        curve = figures.pop("curve")
        lines.append(f"{name}: threshold {model['threshold']}, cross-validated {figures}")
        lines += [f"  at {p['threshold']:.1f}: observation recall {p['observation_recall']:.3f}, "
                  f"precision {p['precision']:.3f}" for p in curve]  # fmt: skip
    emit({k: v["cross_validated"] for k, v in fitted["models"].items()}, lines)


def _write(out: str | None, value: object) -> None:
    """``value`` as JSON into the file ``out``, if one was given."""
    if out:
        Path(out).write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")


def _report(runs: Sequence[report.Run], folder: str, result: object = None) -> Path:
    """Write the report of ``runs`` in ``folder``, and ``result`` beside it as ``result.json``
    if given; returns the page.  A file system error is one error line."""
    try:
        page = report.write(runs, folder)
        if result is not None:
            _write(str(page.parent / "result.json"), result)
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise click.ClickException(f"cannot write the report in {folder}: {why}") from exc
    return page


def _samples(data: str, conversations: int | None) -> list[dict[str, Any]]:
    try:
        return locomo.load(data)[:conversations]
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
