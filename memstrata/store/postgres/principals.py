"""``PrincipalStore`` over the ``users`` and ``api_keys`` tables."""

from __future__ import annotations

import time

from memstrata.errors import AlreadyExists
from memstrata.model import ApiKey, User, to_epoch
from memstrata.store import rows
from memstrata.store.postgres import writes
from memstrata.store.postgres.connection import PostgresDatabase


class PostgresPrincipals(PostgresDatabase):
    """``PrincipalStore``: users and their API keys (hashes only), each change an event."""

    def put_user(self, user: User) -> None:
        with self.transaction() as conn:
            done = conn.execute(
                f"INSERT INTO users ({rows.USER_COLUMNS}) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (user_id) DO NOTHING",
                (user.user_id, user.name, user.role, to_epoch(user.created_at)),
            ).rowcount
            if not done:
                raise AlreadyExists("user", user.user_id)
            writes.event(conn, user.user_id, None, None, "create_user", after={"role": user.role})

    def get_user(self, user_id: str) -> User | None:
        found = self.row(f"SELECT {rows.USER_COLUMNS} FROM users WHERE user_id = %s", (user_id,))
        return None if found is None else rows.user_from_row(found)

    def list_users(self) -> list[User]:
        sql = f"SELECT {rows.USER_COLUMNS} FROM users ORDER BY created_at, user_id"
        return [rows.user_from_row(r) for r in self.rows(sql)]

    def put_key(self, key: ApiKey, key_hash: str) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO api_keys (key_id, user_id, key_hash, label, created_at, revoked_at) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                (
                    key.key_id,
                    key.user_id,
                    key_hash,
                    key.label,
                    to_epoch(key.created_at),
                    to_epoch(key.revoked_at),
                ),
            )
            writes.event(conn, key.user_id, None, None, "create_key", after={"key_id": key.key_id})

    def key_user(self, key_hash: str) -> str | None:
        sql = "SELECT user_id FROM api_keys WHERE key_hash = %s AND revoked_at IS NULL"
        found = self.row(sql, (key_hash,))
        return None if found is None else str(found[0])

    def list_keys(self, user_id: str) -> list[ApiKey]:
        sql = (
            "SELECT key_id, user_id, label, created_at, revoked_at FROM api_keys "
            "WHERE user_id = %s ORDER BY created_at, key_id"
        )
        return [rows.key_from_row(r) for r in self.rows(sql, (user_id,))]

    def key_hashes(self, user_id: str) -> dict[str, str]:
        sql = "SELECT key_id, key_hash FROM api_keys WHERE user_id = %s"
        return {r[0]: r[1] for r in self.rows(sql, (user_id,))}

    def revoke_key(self, user_id: str, key_id: str, actor: str) -> bool:
        with self.transaction() as conn:
            done = conn.execute(
                "UPDATE api_keys SET revoked_at = %s WHERE key_id = %s AND user_id = %s "
                "AND revoked_at IS NULL",
                (time.time(), key_id, user_id),
            ).rowcount
            if done:
                writes.event(conn, actor, None, None, "revoke_key", after={"key_id": key_id})
            return bool(done)
