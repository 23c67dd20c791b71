"""``memstrata users …``: create and list users, and manage their API keys."""

from __future__ import annotations

import click

from memstrata.cli import render
from memstrata.cli.app import emit, with_memory
from memstrata.memory.system import MemoryOS
from memstrata.model import ROLES


@click.group()
def users() -> None:
    """Create and list users."""


@users.command("create")
@click.argument("user_id")
@click.option("--name", help="Display name.")
@click.option("--role", type=click.Choice(ROLES), default="user", show_default=True)
@click.option(
    "--exist-ok", is_flag=True, help="A taken USER_ID is no error: that user is printed as stored."
)
@with_memory
def users_create(
    memory: MemoryOS, user_id: str, name: str | None, role: str, exist_ok: bool
) -> None:
    """Create the user USER_ID."""
    user = memory.create_user(user_id, name=name, role=role, exist_ok=exist_ok)
    emit(user, render.table([render.user_row(user)]))


@users.command("list")
@with_memory
def users_list(memory: MemoryOS) -> None:
    """List every user, oldest first."""
    found = memory.list_users()
    emit(found, render.table(map(render.user_row, found)))


@users.command("create-key")
@click.argument("user_id")
@click.option("--label", help="What the key is for (shown in key lists).")
@with_memory
def users_create_key(memory: MemoryOS, user_id: str, label: str | None) -> None:
    """Create an API key for USER_ID and print it (it is shown this once)."""
    key = memory.create_key(user_id, by=user_id, label=label)
    emit({"key_id": key.key_id, "key": key.secret}, [f"{key.key_id}  {key.secret}"])


@users.command("keys")
@click.argument("user_id")
@with_memory
def users_keys(memory: MemoryOS, user_id: str) -> None:
    """List USER_ID's API keys (ids and labels; the keys themselves are not stored)."""
    found = memory.list_keys(user_id, by=user_id)
    emit([render.key_record(k) for k in found], render.table(map(render.key_row, found)))


@users.command("revoke-key")
@click.argument("user_id")
@click.argument("key_id")
@with_memory
def users_revoke_key(memory: MemoryOS, user_id: str, key_id: str) -> None:
    """Revoke USER_ID's API key KEY_ID."""
    memory.revoke_key(user_id, key_id, by=user_id)
    emit({"revoked": key_id}, [f"revoked key {key_id}"])
