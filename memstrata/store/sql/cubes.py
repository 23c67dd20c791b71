"""``CubeStore`` over the ``cubes`` and ``grants`` tables, for both engines."""

from __future__ import annotations

from memstrata.errors import AlreadyExists
from memstrata.model import Cube, Grant, to_epoch
from memstrata.store import rows
from memstrata.store.sql import writes
from memstrata.store.sql.database import SQLDatabase

_GRANT = ", ".join(writes.GRANT_COLUMNS)
_CUBE = ", ".join("c." + c for c in rows.CUBE_COLUMNS.split(", "))


class SQLCubes(SQLDatabase):
    """``CubeStore``: cubes and who may use them, each change an event."""

    def put_cube(self, cube: Cube) -> None:
        with self.transaction() as conn:
            if not writes.insert_cube(self.dialect, conn, cube):
                raise AlreadyExists("cube", cube.cube_id)
            writes.event(self.dialect, conn, cube.owner, cube.cube_id, None, "create_cube",
                         after={"name": cube.name})  # fmt: skip
            self.put_grant(Grant(cube.cube_id, cube.owner, "admin", cube.owner, cube.created_at))

    def get_cube(self, cube_id: str) -> Cube | None:
        sql = f"SELECT {rows.CUBE_COLUMNS} FROM cubes WHERE cube_id = {self.dialect.mark}"
        found = self.row(sql, (cube_id,))
        return None if found is None else rows.cube_from_row(found)

    def list_cubes(self, user_id: str) -> list[Cube]:
        sql = (
            f"SELECT {_CUBE} FROM cubes c JOIN grants g ON g.cube_id = c.cube_id "
            f"WHERE g.user_id = {self.dialect.mark} ORDER BY c.created_at, c.cube_id"
        )
        return [rows.cube_from_row(r) for r in self.rows(sql, (user_id,))]

    def put_grant(self, grant: Grant) -> None:
        d = self.dialect
        replace = "permission = excluded.permission, granted_by = excluded.granted_by, " \
            "granted_at = excluded.granted_at"  # fmt: skip
        statement = d.upsert("grants", writes.GRANT_COLUMNS, ("cube_id", "user_id"), replace)
        with self.transaction() as conn:
            conn.execute(
                statement,
                (grant.cube_id, grant.user_id, grant.permission, grant.granted_by,
                 to_epoch(grant.granted_at)),
            )  # fmt: skip
            after = {"user_id": grant.user_id, "permission": grant.permission}
            writes.event(d, conn, grant.granted_by, grant.cube_id, None, "grant", after=after)

    def delete_grant(self, cube_id: str, user_id: str, actor: str) -> bool:
        d = self.dialect
        with self.transaction() as conn:
            done = conn.execute(
                f"DELETE FROM grants WHERE cube_id = {d.mark} AND user_id = {d.mark}",
                (cube_id, user_id),
            ).rowcount
            if done:
                writes.event(d, conn, actor, cube_id, None, "revoke", after={"user_id": user_id})
            return bool(done)

    def list_grants(self, cube_id: str) -> list[Grant]:
        sql = (
            f"SELECT {_GRANT} FROM grants WHERE cube_id = {self.dialect.mark} "
            "ORDER BY granted_at, user_id"
        )
        return [rows.grant_from_row(r) for r in self.rows(sql, (cube_id,))]

    def permission(self, cube_id: str, user_id: str) -> str | None:
        m = self.dialect.mark
        sql = f"SELECT permission FROM grants WHERE cube_id = {m} AND user_id = {m}"
        found = self.row(sql, (cube_id, user_id))
        return None if found is None else str(found[0])
