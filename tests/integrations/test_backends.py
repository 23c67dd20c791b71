"""The two backends of the adapters: ``mapping.Backend`` and ``aio.AsyncBackend`` make the same
calls, from one table (``mapping.CALLS``)."""

from __future__ import annotations

import asyncio
import inspect

from memstrata import MemoryOS
from memstrata.integrations import mapping
from memstrata.integrations.aio import AsyncBackend


def test_the_async_backend_has_every_call_of_the_table_with_the_same_signature() -> None:
    for name in mapping.CALLS:
        sync = getattr(mapping.Backend, name)
        awaited = getattr(AsyncBackend, name)
        assert inspect.iscoroutinefunction(awaited), name
        assert inspect.signature(awaited) == inspect.signature(sync), name
        assert awaited.__doc__ == sync.__doc__


def test_every_call_of_the_table_is_a_call_of_the_core() -> None:
    for name in mapping.CALLS:
        assert "user_id" in inspect.signature(getattr(MemoryOS, name)).parameters, name


def test_a_generated_call_acts_as_the_backends_user(tmp_path: object) -> None:
    async def scenario() -> tuple[list[str], list[str]]:
        with MemoryOS.open(f"{tmp_path}/m.db") as mos:
            backend = AsyncBackend(mos, user_id="ann", cube_id=None)
            try:
                cube = await backend.cube_id()
                ids = await backend.add([{"role": "user", "content": "I keep bees."}], cube_id=cube)
                hits = await backend.search("bees", cube_ids=[cube], top_k=3)
                return ids, [h.item.id for h in hits]
            finally:
                await backend.aclose()

    ids, found = asyncio.run(scenario())
    assert found == ids
