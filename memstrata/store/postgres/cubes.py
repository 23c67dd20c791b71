"""``CubeStore`` over the ``cubes`` and ``grants`` tables."""

from __future__ import annotations

from memstrata.errors import AlreadyExists
from memstrata.model import Cube, Grant, to_epoch
from memstrata.store import rows
from memstrata.store.postgres import writes
from memstrata.store.postgres.connection import PostgresDatabase


class PostgresCubes(PostgresDatabase):
    """``CubeStore``: cubes and who may use them, each change an event."""

    def put_cube(self, cube: Cube) -> None:
        with self.transaction() as conn:
            if not writes.insert_cube(conn, cube):
                raise AlreadyExists("cube", cube.cube_id)
            after = {"name": cube.name}
            writes.event(conn, cube.owner, cube.cube_id, None, "create_cube", after=after)
            self.put_grant(Grant(cube.cube_id, cube.owner, "admin", cube.owner, cube.created_at))

    def get_cube(self, cube_id: str) -> Cube | None:
        found = self.row(f"SELECT {rows.CUBE_COLUMNS} FROM cubes WHERE cube_id = %s", (cube_id,))
        return None if found is None else rows.cube_from_row(found)

    def list_cubes(self, user_id: str) -> list[Cube]:
        sql = (
            f"SELECT {', '.join('c.' + c for c in rows.CUBE_COLUMNS.split(', '))} FROM cubes c "
            "JOIN grants g ON g.cube_id = c.cube_id WHERE g.user_id = %s "
            "ORDER BY c.created_at, c.cube_id"
        )
        return [rows.cube_from_row(r) for r in self.rows(sql, (user_id,))]

    def put_grant(self, grant: Grant) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO grants (cube_id, user_id, permission, granted_by, granted_at) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (cube_id, user_id) DO UPDATE SET "
                "permission = excluded.permission, granted_by = excluded.granted_by, "
                "granted_at = excluded.granted_at",
                (grant.cube_id, grant.user_id, grant.permission, grant.granted_by,
                 to_epoch(grant.granted_at)),
            )  # fmt: skip
            after = {"user_id": grant.user_id, "permission": grant.permission}
            writes.event(conn, grant.granted_by, grant.cube_id, None, "grant", after=after)

    def delete_grant(self, cube_id: str, user_id: str, actor: str) -> bool:
        with self.transaction() as conn:
            done = conn.execute(
                "DELETE FROM grants WHERE cube_id = %s AND user_id = %s", (cube_id, user_id)
            ).rowcount
            if done:
                writes.event(conn, actor, cube_id, None, "revoke", after={"user_id": user_id})
            return bool(done)

    def list_grants(self, cube_id: str) -> list[Grant]:
        sql = (
            "SELECT cube_id, user_id, permission, granted_by, granted_at FROM grants "
            "WHERE cube_id = %s ORDER BY granted_at, user_id"
        )
        return [rows.grant_from_row(r) for r in self.rows(sql, (cube_id,))]

    def permission(self, cube_id: str, user_id: str) -> str | None:
        sql = "SELECT permission FROM grants WHERE cube_id = %s AND user_id = %s"
        found = self.row(sql, (cube_id, user_id))
        return None if found is None else str(found[0])
