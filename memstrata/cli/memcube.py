"""``memstrata export`` and ``memstrata import``: a cube to and from a MemCube (docs/memcube.md).

Thin adapters over ``MemoryOS.export`` and ``MemoryOS.import_cube``: parse the arguments, call the
core (with a progress bar on a terminal), print a line (or JSON with ``--json``).  Every failure is the CLI's one ``error: …`` line.
"""

from __future__ import annotations

import click

from memstrata.cli import render
from memstrata.cli.app import emit, options
from memstrata.cli.progress import progress_bar
from memstrata.memcube import FORMAT_VERSION


@click.command("export")
@click.argument("cube_id")
@click.argument("path", type=click.Path())
@click.option(
    "--user", "user_id", required=True, metavar="USER", help="Acting user; needs admin on the cube."
)
@click.option("--no-artifacts", is_flag=True, help="Leave out the cube's KV caches and adapters.")
def export_command(cube_id: str, path: str, user_id: str, no_artifacts: bool) -> None:
    """Write CUBE_ID to PATH: a new directory, or a .tar.gz archive when PATH ends so.

    PATH must not exist (an empty directory is fine): an export never overwrites.
    """
    with options().open() as memory, progress_bar(f"exporting {cube_id}") as progress:
        manifest = memory.export(
            cube_id, path, user_id=user_id, artifacts=not no_artifacts, progress=progress
        )
    counts = manifest.counts
    emit(
        {"cube_id": cube_id, "path": path, "format_version": FORMAT_VERSION, "counts": counts},
        [
            f"exported cube {cube_id} to {path}: {counts['items']} items, "
            f"{counts['versions']} versions, {counts['events']} events, "
            f"{counts['artifacts']} artifacts"
        ],
    )


@click.command("import")
@click.argument("path", type=click.Path(exists=True))
@click.option(
    "--owner", required=True, metavar="USER", help="User who owns the new cube (gets admin)."
)
@click.option(
    "--user",
    "user_id",
    metavar="USER",
    help="Acting user  [default: OWNER]; only an administrator imports for another owner, and "
    "only an administrator's import keeps the MemCube's ids and authors (anyone else's is a copy "
    "with new ids, authored by USER).",
)
@click.option(
    "--cube-id",
    metavar="ID",
    help="Id of the new cube  [default: the exported id; a new one with --remap-ids]",
)
@click.option(
    "--remap-ids",
    is_flag=True,
    help="Give every item and artifact a new id (to import a copy next to the original).",
)
@click.option(
    "--reembed",
    is_flag=True,
    help="Recompute the vectors with this database's embedder (needed when the MemCube's differs).",
)
def import_command(
    path: str,
    owner: str,
    user_id: str | None,
    cube_id: str | None,
    remap_ids: bool,
    reembed: bool,
) -> None:
    """Import the MemCube at PATH (a directory or a .tar.gz) as a new cube."""
    with options().open() as memory, progress_bar(f"re-embedding {path}") as progress:
        cube = memory.import_cube(
            path, owner=owner, by=user_id, cube_id=cube_id, keep_ids=not remap_ids,
            reembed=reembed, progress=progress,
        )  # fmt: skip
    emit(cube, [f"imported {path} as cube {cube.cube_id}", *render.table([render.cube_row(cube)])])
