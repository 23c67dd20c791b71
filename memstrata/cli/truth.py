"""``memstrata feedback | expire``: corrections in words and erasure of what expired
(``MemoryOS.feedback``, ``MemoryOS.expire``; docs/lifecycle.md)."""

from __future__ import annotations

import click

from memstrata.cli.app import emit, user_option, with_memory
from memstrata.memory.system import MemoryOS


@click.command("feedback")
@click.argument("text")
@user_option
@click.option("--cube", "cube_id", required=True, metavar="CUBE", help="Cube (needs write).")
@click.option(
    "--item", "item_ids", multiple=True, metavar="ID", help="A memory it is about (repeatable)."
)
@click.option("--corrected", metavar="TEXT", help="The corrected statement.")
@with_memory
def feedback_command(
    memory: MemoryOS,
    text: str,
    user_id: str,
    cube_id: str,
    item_ids: tuple[str, ...],
    corrected: str | None,
) -> None:
    """Correct, reject, forget or confirm memories in words: "No, I moved to Porto, not
    Lisbon", "that's wrong", "forget that I smoke", "yes, that's right"."""
    result = memory.feedback(
        text, user_id=user_id, cube_id=cube_id, item_ids=list(item_ids) or None,
        corrected=corrected,
    )  # fmt: skip
    lines = [f"{result.kind}: {', '.join(result.affected) or 'nothing'}"]
    if result.new_item_id is not None:
        lines.append(f"new: {result.new_item_id}")
    emit(result, lines)


@click.command("expire")
@user_option
@click.option("--cube", "cube_id", metavar="CUBE", help="Cube (needs write)  [default: all]")
@with_memory
def expire_command(memory: MemoryOS, user_id: str, cube_id: str | None) -> None:
    """Erase now the memories whose expiry has passed (every cube: an administrator's)."""
    erased = memory.expire(user_id=user_id, cube_id=cube_id)
    emit({"erased": erased}, [f"erased: {erased}"])
