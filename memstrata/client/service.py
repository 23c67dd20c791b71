"""``Client``'s calls on the service: tasks (and their retry), wait, configure, metrics, health,
MemCube files, artifacts."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, TypedDict

from memstrata.client.transport import Exchange, Requests, Save, load_as, path_segment
from memstrata.errors import MemCubeError
from memstrata.limits import MAX_WAIT_S
from memstrata.model import Cube
from memstrata.scheduler import Task, TaskStatus


class Health(TypedDict):
    status: str
    version: str


class Service:
    """Background tasks, settings, metrics and MemCube transfer as exchanges (``client.transport``)."""

    def __init__(self) -> None:
        self._http = Requests()

    def tasks(
        self, *, cube_id: str | None = None, status: TaskStatus | None = None, limit: int = 100
    ) -> Exchange[list[Task]]:
        """Recent background tasks (newest first) of ``cube_id``, or of every readable cube."""
        given = {"cube_id": cube_id, "status": status, "limit": limit}
        params = {name: value for name, value in given.items() if value is not None}
        return [
            load_as(Task, t) for t in (yield from self._http.json("GET", "/tasks", params=params))
        ]

    def retry_task(self, task_id: str) -> Exchange[Task]:
        """Give a failed task one more attempt (``MemoryOS.retry_task``); the task as it stands.

        ``NotFoundError`` for a task the caller cannot see, ``PermissionDenied`` without
        ``write`` on its cube, ``ConflictError`` when it has not failed.
        """
        path = f"/tasks/{path_segment(task_id)}/retry"
        return load_as(Task, (yield from self._http.json("POST", path)))

    def wait(self, cube_id: str | None = None, timeout: float | None = None) -> Exchange[bool]:
        """Block until ``cube_id`` (default: every cube the caller may read) has no outstanding
        task; False when ``timeout`` seconds pass first (None: no limit).  The server holds one
        request at most ``limits.MAX_WAIT_S``, so a longer wait is several requests.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = MAX_WAIT_S if deadline is None else max(0.0, deadline - time.monotonic())
            ask = min(MAX_WAIT_S, left)
            body = {"cube_id": cube_id, "timeout_s": ask}
            done = bool(
                (yield from self._http.json("POST", "/tasks/wait", body=body, timeout=ask))["done"]
            )
            if done or (deadline is not None and time.monotonic() >= deadline):
                return done

    def configure(self, /, **changes: int | float) -> Exchange[dict[str, int | float]]:
        """Change runtime search settings (admin only); returns every runtime setting."""
        return dict((yield from self._http.json("POST", "/configure", body=changes)))

    def metrics(self) -> Exchange[str]:
        """The server's Prometheus metrics (requests, latency; items and tasks of your cubes)."""
        return (yield from self._http.send("GET", "/metrics")).text

    def health(self) -> Exchange[Health]:
        """``{"status": "ok", "version"}`` (needs no key)."""
        found = yield from self._http.json("GET", "/health")
        return Health(status=found["status"], version=found["version"])

    def artifacts(self, cube_id: str) -> Exchange[list[dict[str, Any]]]:
        """The cube's artifacts, oldest first (``MemoryOS.artifacts`` without the server's file
        paths): ``artifact_id``, ``kind``, ``fingerprint``, ``sha256``, ``size_bytes``,
        ``metadata``, ``created_at``."""
        found = yield from self._http.json("GET", f"/mem_cubes/{path_segment(cube_id)}/artifacts")
        return list(found)

    def build_activation(self, cube_id: str) -> Exchange[dict[str, Any] | None]:
        """``MemoryOS.build_activation`` on the server: the cube's KV cache (as ``artifacts``
        shows it), or None."""
        found = yield from self._http.json("POST", f"/mem_cubes/{path_segment(cube_id)}/activation")
        return None if found is None else dict(found)

    def queue_adapter(self, cube_id: str) -> Exchange[Task]:
        """``MemoryOS.queue_adapter`` on the server: the ``train_adapter`` task of the cube (its
        adapter shows in ``artifacts`` once the task is done)."""
        where = f"/mem_cubes/{path_segment(cube_id)}/adapter"
        return load_as(Task, (yield from self._http.json("POST", where)))

    def export(
        self, cube_id: str, path: str | os.PathLike[str], *, artifacts: bool = True
    ) -> Exchange[Path]:
        """Download cube ``cube_id`` as a MemCube ``.tar.gz`` at ``path`` (a new file; needs admin;
        without ``artifacts``, leaving out its KV caches and adapters).

        Never overwrites (``MemCubeError``); a failed download leaves no file.
        """
        target = Path(path)
        if target.exists():
            raise MemCubeError(f"{target} exists", hint="export to a new file")
        where = f"/mem_cubes/{path_segment(cube_id)}/export"
        params = {} if artifacts else {"artifacts": "false"}
        response = yield from self._http.send("POST", where, stream=True, params=params)
        yield Save(response, target)
        return target

    def import_cube(
        self,
        path: str | os.PathLike[str],
        *,
        cube_id: str | None = None,
        keep_ids: bool = True,
        reembed: bool = False,
    ) -> Exchange[Cube]:
        """Upload the MemCube ``.tar.gz`` at ``path`` as a new cube owned by the caller; all or
        nothing.  ``keep_ids=False`` gives every item a new id (a copy beside the original);
        ``reembed`` recomputes the vectors (needed when the archive has another embedder).

        The caller is who imports (the ``by=`` of ``MemoryOS.import_cube``).  An administrator's
        import is a restore: ids (with ``keep_ids``) and the users the MemCube names are kept.
        Anyone else's is a copy: every item gets a new id whatever ``keep_ids`` says, and what
        the MemCube says others did becomes the caller's, the original names kept in
        ``metadata["origin"]``.
        """
        fields = {"remap_ids": str(not keep_ids).lower(), "reembed": str(reembed).lower()}
        if cube_id is not None:
            fields["cube_id"] = cube_id
        with Path(path).open("rb") as archive:
            files = {"file": (Path(path).name, archive, "application/gzip")}
            response = yield from self._http.send(
                "POST", "/mem_cubes/import", data=fields, files=files
            )
        return load_as(Cube, response.json())
