"""``memstrata cubes …``: create, list, share and re-embed memory cubes, list their artifacts and
build their KV cache (export and import are ``memcube``'s)."""

from __future__ import annotations

import click

from memstrata.cli import render
from memstrata.cli.app import emit, user_option, with_memory
from memstrata.cli.progress import progress_bar
from memstrata.memory.system import MemoryOS
from memstrata.model import CUBE_KINDS, PERMISSIONS
from memstrata.wire import artifact_to_wire


@click.group()
def cubes() -> None:
    """Create, list, share and re-embed memory cubes; their artifacts."""


@cubes.command("create")
@click.argument("name")
@click.option("--owner", required=True, metavar="USER", help="Owning user (gets admin).")
@click.option("--cube-id", metavar="ID", help="Id of the new cube  [default: generated]")
@click.option("--kind", type=click.Choice(CUBE_KINDS), default="user", show_default=True)
@click.option(
    "--exist-ok",
    is_flag=True,
    help="Print OWNER's cube of that id (or, without --cube-id, of that name) if there is one.",
)
@with_memory
def cubes_create(
    memory: MemoryOS, name: str, owner: str, cube_id: str | None, kind: str, exist_ok: bool
) -> None:
    """Create a cube called NAME."""
    cube = memory.create_cube(name, owner=owner, cube_id=cube_id, kind=kind, exist_ok=exist_ok)
    emit(cube, render.table([render.cube_row(cube)]))


@cubes.command("list")
@user_option
@with_memory
def cubes_list(memory: MemoryOS, user_id: str) -> None:
    """List the cubes USER may read, oldest first."""
    found = memory.list_cubes(user_id=user_id)
    emit(found, render.table(map(render.cube_row, found)))


@cubes.command("grant")
@click.argument("cube_id")
@click.argument("user_id")
@click.argument("permission", type=click.Choice(PERMISSIONS))
@click.option("--by", required=True, metavar="USER", help="Granting user; needs admin on the cube.")
@with_memory
def cubes_grant(memory: MemoryOS, cube_id: str, user_id: str, permission: str, by: str) -> None:
    """Give USER_ID PERMISSION (read, write or admin) on CUBE_ID."""
    grant = memory.grant(cube_id, user_id, permission, by=by)
    emit(grant, [f"granted {grant.permission} on cube {grant.cube_id} to {grant.user_id}"])


@cubes.command("reembed")
@click.argument("cube_id")
@user_option
@with_memory
def cubes_reembed(memory: MemoryOS, cube_id: str, user_id: str) -> None:
    """Re-embed every item of CUBE_ID with the current embedder (needs admin)."""
    with progress_bar(f"re-embedding {cube_id}") as progress:
        count = memory.reembed(cube_id, user_id=user_id, progress=progress)
    emit({"cube_id": cube_id, "items": count}, [f"re-embedded {count} items in {cube_id}"])


@cubes.command("artifacts")
@click.argument("cube_id")
@user_option
@with_memory
def cubes_artifacts(memory: MemoryOS, cube_id: str, user_id: str) -> None:
    """List the KV caches and adapters of CUBE_ID, oldest first (needs read)."""
    found = memory.artifacts(cube_id, user_id=user_id)
    rows = [render.artifact_row(a) for a in found]
    emit([artifact_to_wire(a) for a in found], render.table(rows))


@cubes.command("activation")
@click.argument("cube_id")
@user_option
@with_memory
def cubes_activation(memory: MemoryOS, cube_id: str, user_id: str) -> None:
    """Prefill the local chat model with CUBE_ID's stable context now and keep the KV cache
    (needs write; docs/chat.md, "Activation memory")."""
    made = memory.build_activation(cube_id, user_id=user_id)
    if made is None:
        emit(None, ["no KV cache: no local chat model, activation_tokens is 0, or nothing is "
                    "stable in the cube yet"])  # fmt: skip
        return
    emit(artifact_to_wire(made), render.table([render.artifact_row(made)]))


@cubes.command("adapter")
@click.argument("cube_id")
@user_option
@with_memory
def cubes_adapter(memory: MemoryOS, cube_id: str, user_id: str) -> None:
    """Train CUBE_ID's LoRA adapter on its long-tier facts now (needs write and the adapt
    extra; docs/chat.md, "Parametric memory"); the same as ``memstrata adapt``."""
    _adapt(memory, cube_id, user_id)


@click.command("adapt")
@click.argument("cube_id")
@user_option
@with_memory
def adapt_command(memory: MemoryOS, cube_id: str, user_id: str) -> None:
    """Train CUBE_ID's LoRA adapter on its long-tier facts now: parametric memory (needs
    write and the adapt extra; a bar counts the training batches on a terminal)."""
    _adapt(memory, cube_id, user_id)


def _adapt(memory: MemoryOS, cube_id: str, user_id: str) -> None:
    with progress_bar(f"training {cube_id}") as progress:
        made = memory.train_adapter(cube_id, user_id=user_id, progress=progress)
    if made is None:
        emit(None, ["no adapter: the cube has no long-tier facts to learn yet"])
        return
    emit(artifact_to_wire(made), render.table([render.artifact_row(made)]))
