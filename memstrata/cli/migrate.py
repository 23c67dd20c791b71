"""``memstrata migrate``: copy a whole memory to another database (SQLite to PostgreSQL, …).

The work is ``memstrata.memory.migration`` (what is copied, how a second run resumes); this
command opens both databases, shows a progress bar over the cubes (on a terminal), prints what it
did, and exits 1 when the count check at the end finds a cube that differs.
"""

from __future__ import annotations

import click

from memstrata.cli.app import options
from memstrata.cli.progress import progress_bar
from memstrata.cli.worker import without_password
from memstrata.memory.migration import cube_ids, migrate, opened


@click.command("migrate")
@click.option("--from", "source", required=True, metavar="DB",
              help="The database to copy: an SQLite file (or sqlite:///path) or postgresql://…")  # fmt: skip
@click.option("--to", "target", required=True, metavar="DB",
              help="Where to copy it: a new or partly copied database (postgresql://… or a file)")  # fmt: skip
def migrate_command(source: str, target: str) -> None:
    """Copy every user, key, cube and grant of --from into --to (run again to resume)."""
    with opened(source, target, options().settings()) as (src, dst):
        total = len(cube_ids(src))
        label = f"{without_password(source)} → {without_password(target)}"
        with progress_bar(label) as progress:
            progress(0, total)
            done = migrate(src, dst, on_cube=lambda _: progress(1, total))
    click.echo(
        f"copied {done.users} user(s), {done.keys} key(s), {done.cubes} cube(s) with "
        f"{done.items} item(s), {done.grants} grant(s); {done.skipped_cubes} cube(s) were "
        "there already"
    )
    for cube_id, (have, got) in sorted(done.mismatches.items()):
        click.echo(f"cube {cube_id}: {have} item(s) in the source, {got} in the target", err=True)
    if done.mismatches:
        raise SystemExit(1)
    click.echo(f"checked: every cube has as many items in the target ({total} cube(s))")
