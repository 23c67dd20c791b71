"""``memstrata vacuum``: make what erasures removed leave the database's files (``MemoryOS.vacuum``)."""

from __future__ import annotations

import click

from memstrata.cli.app import emit, user_option, with_memory
from memstrata.memory.system import MemoryOS


@click.command("vacuum")
@user_option
@with_memory
def vacuum_command(memory: MemoryOS, user_id: str) -> None:
    """Rewrite the database without free space, so erased text is nowhere in its files (an
    administrator's; recorded in the audit).  SQLite: VACUUM between WAL checkpoints; PostgreSQL:
    VACUUM FULL of the tables that hold content (other writes wait while it runs)."""
    sizes = memory.vacuum(user_id=user_id)
    emit(
        sizes, [f"vacuumed: {sizes['bytes_before']:,} bytes before, {sizes['bytes_after']:,} after"]
    )
