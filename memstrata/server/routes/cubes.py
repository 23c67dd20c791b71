"""Memory cubes and sharing: ``/mem_cubes…`` (export and import are in ``memcube``)."""

from __future__ import annotations

from fastapi import Response

from memstrata.model import Cube, Grant
from memstrata.scheduler import Task
from memstrata.server.auth import Caller, Memory
from memstrata.server.routes import make_router
from memstrata.server.schemas import ArtifactOut, CubeDeleted, CubeIn, ShareIn

router = make_router("cubes")


@router.post("/mem_cubes", status_code=201, summary="Create a cube owned by the caller")
def create_cube(body: CubeIn, memory: Memory, user: Caller) -> Cube:
    return memory.create_cube(
        body.name, owner=user.user_id, cube_id=body.cube_id, kind=body.kind, settings=body.settings
    )


@router.get("/mem_cubes", summary="The cubes the caller may read, oldest first")
def list_cubes(memory: Memory, user: Caller) -> list[Cube]:
    return memory.list_cubes(user_id=user.user_id)


@router.get("/mem_cubes/{cube_id}", summary="One cube (needs read)")
def get_cube(cube_id: str, memory: Memory, user: Caller) -> Cube:
    return memory.get_cube(cube_id, user_id=user.user_id)


@router.delete("/mem_cubes/{cube_id}", summary="Delete a cube and all its memory (needs admin)")
def delete_cube(cube_id: str, memory: Memory, user: Caller) -> CubeDeleted:
    count = memory.delete_cube(cube_id, user_id=user.user_id)
    return CubeDeleted(cube_id=cube_id, deleted_items=count)


@router.post("/mem_cubes/{cube_id}/share", summary="Grant a user read, write or admin")
def share(cube_id: str, body: ShareIn, memory: Memory, user: Caller) -> Grant:
    """Give ``user_id`` ``permission`` on the cube; the caller needs admin on it."""
    return memory.grant(cube_id, body.user_id, body.permission, by=user.user_id)


@router.delete(
    "/mem_cubes/{cube_id}/share/{user_id}", status_code=204, summary="Revoke a user's grant"
)
def revoke(cube_id: str, user_id: str, memory: Memory, user: Caller) -> Response:
    """Take away ``user_id``'s grant (needs admin on the cube); 404 if they hold none.  The owner
    always keeps admin (422)."""
    memory.revoke(cube_id, user_id, by=user.user_id)
    return Response(status_code=204)


@router.get("/mem_cubes/{cube_id}/grants", summary="Who holds what on a cube (needs admin)")
def grants(cube_id: str, memory: Memory, user: Caller) -> list[Grant]:
    """Every grant on the cube, the owner's admin included, oldest first."""
    return memory.grants(cube_id, by=user.user_id)


@router.get("/mem_cubes/{cube_id}/artifacts", summary="A cube's KV caches and adapters (read)")
def artifacts(cube_id: str, memory: Memory, user: Caller) -> list[ArtifactOut]:
    """Every artifact of the cube, oldest first (a KV cache's metadata names its model, token
    count and the items, with versions, it was made from)."""
    return [ArtifactOut.of(a) for a in memory.artifacts(cube_id, user_id=user.user_id)]


@router.post(
    "/mem_cubes/{cube_id}/activation",
    summary="Prefill the local model with the cube's stable context now (needs write)",
)
def build_activation(cube_id: str, memory: Memory, user: Caller) -> ArtifactOut | None:
    """The cube's KV cache for its stable context as it is now, made if missing; null without a
    local chat model, with ``activation_tokens`` 0, or when nothing is stable yet."""
    made = memory.build_activation(cube_id, user_id=user.user_id)
    return None if made is None else ArtifactOut.of(made)


@router.post(
    "/mem_cubes/{cube_id}/adapter",
    status_code=202,
    summary="Queue the training of the cube's LoRA adapter (needs write)",
)
def train_adapter(cube_id: str, memory: Memory, user: Caller) -> Task:
    """The ``train_adapter`` task (one per cube: a training already waiting is the one
    returned); the adapter appears in ``/mem_cubes/{cube_id}/artifacts`` when it is done.
    Training takes minutes of CPU and needs the ``adapt`` extra on the workers."""
    return memory.queue_adapter(cube_id, user_id=user.user_id)
