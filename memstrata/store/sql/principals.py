"""``PrincipalStore`` over the ``users`` and ``api_keys`` tables, for both engines."""

from __future__ import annotations

import time

from memstrata.errors import AlreadyExists
from memstrata.model import ApiKey, User, to_epoch
from memstrata.store import rows
from memstrata.store.sql import writes
from memstrata.store.sql.database import SQLDatabase

_KEY_COLUMNS = "key_id, user_id, label, created_at, revoked_at"


class SQLPrincipals(SQLDatabase):
    """``PrincipalStore``: users and their API keys (hashes only), each change an event."""

    def put_user(self, user: User) -> None:
        d = self.dialect
        # DO NOTHING, then the count: a concurrent writer of the same id is refused the same way.
        statement = d.upsert("users", rows.USER_COLUMNS.split(", "), ("user_id",), None)
        with self.transaction() as conn:
            done = conn.execute(
                statement, (user.user_id, user.name, user.role, to_epoch(user.created_at))
            ).rowcount
            if not done:
                raise AlreadyExists("user", user.user_id)
            writes.event(d, conn, user.user_id, None, None, "create_user",
                         after={"role": user.role})  # fmt: skip

    def get_user(self, user_id: str) -> User | None:
        m = self.dialect.mark
        found = self.row(f"SELECT {rows.USER_COLUMNS} FROM users WHERE user_id = {m}", (user_id,))
        return None if found is None else rows.user_from_row(found)

    def list_users(self) -> list[User]:
        sql = f"SELECT {rows.USER_COLUMNS} FROM users ORDER BY created_at, user_id"
        return [rows.user_from_row(r) for r in self.rows(sql)]

    def put_key(self, key: ApiKey, key_hash: str) -> None:
        d = self.dialect
        columns = ("key_id", "user_id", "key_hash", "label", "created_at", "revoked_at")
        with self.transaction() as conn:
            conn.execute(
                writes.insert(d, "api_keys", columns),
                (key.key_id, key.user_id, key_hash, key.label, to_epoch(key.created_at),
                 to_epoch(key.revoked_at)),
            )  # fmt: skip
            writes.event(d, conn, key.user_id, None, None, "create_key",
                         after={"key_id": key.key_id})  # fmt: skip

    def key_user(self, key_hash: str) -> str | None:
        m = self.dialect.mark
        sql = f"SELECT user_id FROM api_keys WHERE key_hash = {m} AND revoked_at IS NULL"
        found = self.row(sql, (key_hash,))
        return None if found is None else str(found[0])

    def list_keys(self, user_id: str) -> list[ApiKey]:
        sql = (
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE user_id = {self.dialect.mark} "
            "ORDER BY created_at, key_id"
        )
        return [rows.key_from_row(r) for r in self.rows(sql, (user_id,))]

    def key_hashes(self, user_id: str) -> dict[str, str]:
        sql = f"SELECT key_id, key_hash FROM api_keys WHERE user_id = {self.dialect.mark}"
        return {r[0]: r[1] for r in self.rows(sql, (user_id,))}

    def revoke_key(self, user_id: str, key_id: str, actor: str) -> bool:
        d = self.dialect
        m = d.mark
        with self.transaction() as conn:
            done = conn.execute(
                f"UPDATE api_keys SET revoked_at = {m} WHERE key_id = {m} AND user_id = {m} "
                "AND revoked_at IS NULL",
                (time.time(), key_id, user_id),
            ).rowcount
            if done:
                writes.event(d, conn, actor, None, None, "revoke_key", after={"key_id": key_id})
            return bool(done)
