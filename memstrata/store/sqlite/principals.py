"""``PrincipalStore`` over the ``users`` and ``api_keys`` tables."""

from __future__ import annotations

import sqlite3
import time

from memstrata.errors import AlreadyExists
from memstrata.model import ApiKey, User, to_epoch
from memstrata.store import rows
from memstrata.store.sqlite import writes
from memstrata.store.sqlite.connection import SQLiteDatabase


class SQLitePrincipals(SQLiteDatabase):
    """``PrincipalStore``: users and their API keys (hashes only), each change an event."""

    def put_user(self, user: User) -> None:
        with self.transaction() as conn:
            try:
                conn.execute(
                    f"INSERT INTO users ({rows.USER_COLUMNS}) VALUES (?, ?, ?, ?)",
                    (user.user_id, user.name, user.role, to_epoch(user.created_at)),
                )
            except sqlite3.IntegrityError as exc:
                raise AlreadyExists("user", user.user_id) from exc
            writes.event(conn, user.user_id, None, None, "create_user", after={"role": user.role})

    def get_user(self, user_id: str) -> User | None:
        sql = f"SELECT {rows.USER_COLUMNS} FROM users WHERE user_id = ?"
        row = self.reader().execute(sql, (user_id,)).fetchone()
        return None if row is None else rows.user_from_row(row)

    def list_users(self) -> list[User]:
        sql = f"SELECT {rows.USER_COLUMNS} FROM users ORDER BY created_at, user_id"
        return [rows.user_from_row(r) for r in self.reader().execute(sql)]

    def put_key(self, key: ApiKey, key_hash: str) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO api_keys (key_id, user_id, key_hash, label, created_at, revoked_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
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
        sql = "SELECT user_id FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL"
        row = self.reader().execute(sql, (key_hash,)).fetchone()
        return None if row is None else str(row[0])

    def list_keys(self, user_id: str) -> list[ApiKey]:
        sql = (
            "SELECT key_id, user_id, label, created_at, revoked_at FROM api_keys "
            "WHERE user_id = ? ORDER BY created_at, key_id"
        )
        return [rows.key_from_row(r) for r in self.reader().execute(sql, (user_id,))]

    def key_hashes(self, user_id: str) -> dict[str, str]:
        sql = "SELECT key_id, key_hash FROM api_keys WHERE user_id = ?"
        return {r[0]: r[1] for r in self.reader().execute(sql, (user_id,))}

    def revoke_key(self, user_id: str, key_id: str, actor: str) -> bool:
        with self.transaction() as conn:
            done = conn.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND user_id = ? "
                "AND revoked_at IS NULL",
                (time.time(), key_id, user_id),
            ).rowcount
            if done:
                writes.event(conn, actor, None, None, "revoke_key", after={"key_id": key_id})
            return bool(done)
