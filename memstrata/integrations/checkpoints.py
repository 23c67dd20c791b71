"""``MemstrataSaver``: LangGraph's checkpoints kept in memstrata, and the threads' messages
flowing into the user's memory (imported from ``memstrata.integrations.langgraph``).

Mapping (``memstrata.integrations.mapping``):

* **A thread is a private cube** of the acting user (``private_cube(…, "lgt", thread_id)``), so
  one user's saver never reads another's threads and ``delete_thread`` is ``delete_cube``:
  every checkpoint, write, version and vector of the thread gone for good.
* **A checkpoint is a record**: the serializer's bytes (checkpoint, metadata, the channel
  values of ``new_versions``) as base64 in the metadata of one item, split across *part* items
  when larger than an item's metadata may be (``limits.MAX_METADATA_BYTES``); the parts are
  added before the record, so a record is never read without them.  Pending writes are records
  too, one per ``put_writes`` call; a *head* item per namespace names the newest checkpoint.
  Every such item is ``frozen`` once written (``archived`` for the head, which changes), so
  none is ever returned by a search, a context or the tiers: they are the adapter's, not
  memories.
* **A channel value is found by its version**: a record names the versions it holds in
  metadata keys (``lgc.b.<digest of the channel>``), so loading a checkpoint asks for each of
  its channels the record that holds that version, as LangGraph's reference saver keys its
  blobs by ``(thread, namespace, channel, version)``.
* **Messages flow into memory**: when a checkpoint changes the ``messages`` channel, its
  messages that have an id and some text are added to the memory cube (``cube_id=`` or the
  user's default cube) as turns of the session named for the thread, each once
  (``external_id`` ``lg:<message id>``).

Each call is a handful of memory calls (``mapping.Backend``: a ``MemoryOS``, ``AsyncMemoryOS``,
``Client`` or ``AsyncClient``); the async forms run the same logic off the event loop, an async
memory's calls awaited on it.
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import json
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from memstrata.errors import ConflictError, NotFoundError
from memstrata.integrations import mapping
from memstrata.integrations.turns import turn_of
from memstrata.limits import MAX_METADATA_BYTES, MAX_TOP_K
from memstrata.model import MemoryItem

__all__ = ["MemstrataSaver"]

KIND, THREAD, NS, ID, UID, PARTS, DATA, SEQ = (
    "lgc", "lgc.thread", "lgc.ns", "lgc.id", "lgc.uid", "lgc.parts", "lgc.data", "lgc.n",
)  # fmt: skip
PARENT, OF, LATEST, BLOB = "lgc.parent", "lgc.of", "lgc.latest", "lgc.b."
#: Statuses a record may be in: frozen once sealed, earlier if a crash came between.
STATUSES = ["generated", "activated", "frozen", "archived"]
#: A thread cube's tiers never move its items (they are sealed anyway).
THREAD_CUBE = {"working_capacity": 10_000, "session_idle_hours": 0}
#: Base64 characters of a part item (its metadata stays well within MAX_METADATA_BYTES).
PART_CHARS = MAX_METADATA_BYTES - 2_000
#: Items one add call carries (well under limits.MAX_MESSAGES).
ADD_BATCH = 200
#: Thread cubes and message ids remembered per saver (they only save calls: both are checked).
REMEMBERED = 4_096


class MemstrataSaver(mapping.OnBackend, BaseCheckpointSaver[int]):
    """A LangGraph checkpointer over memstrata (see the module docs).

    ``memory`` is a ``MemoryOS``, ``AsyncMemoryOS``, ``Client`` or ``AsyncClient``
    (``mapping.Backend``; with an ``AsyncClient`` use the ``a…`` calls); ``user_id`` the acting
    user (created if missing; with a client, its key's owner, and may be omitted); ``cube_id``
    the memory cube the threads' messages flow into (default: the user's default
    cube); ``messages_key`` the channel holding them (None: no flow).
    """

    def __init__(
        self,
        memory: mapping.Memory,
        *,
        user_id: str | None = None,
        cube_id: str | None = None,
        messages_key: str | None = "messages",
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self.memory = memory
        self.backend = mapping.Backend(memory, user_id=user_id, cube_id=cube_id)
        self.messages_key = messages_key
        self._cubes: OrderedDict[str, str] = OrderedDict()
        self._flowed: OrderedDict[str, None] = OrderedDict()

    # -- the cubes ---------------------------------------------------------------------------

    def _cube(self, thread_id: str, create: bool = True) -> str | None:
        """The thread's cube; None when it does not exist and ``create`` is false."""
        if thread_id in self._cubes:
            self._cubes.move_to_end(thread_id)
            return self._cubes[thread_id]
        if not create:
            try:
                self.backend.get_cube(mapping.private_cube_id(self.user_id, "lgt", str(thread_id)))
            except NotFoundError:
                return None
        cube_id = mapping.private_cube(self.backend, "lgt", str(thread_id), settings=THREAD_CUBE)
        self._cubes[thread_id] = cube_id
        while len(self._cubes) > REMEMBERED:
            self._cubes.popitem(last=False)
        return cube_id

    def _thread_cubes(self) -> list[str]:
        cubes = self.backend.list_cubes()
        return [
            c.cube_id for c in cubes if c.owner == self.user_id and c.cube_id.startswith("lgt-")
        ]

    # -- records -----------------------------------------------------------------------------

    def _records(self, cube_id: str, metadata: dict[str, Any]) -> Iterator[MemoryItem]:
        """The items of ``cube_id`` whose metadata has ``metadata``, oldest first."""
        offset = 0
        while True:
            page = self.backend.list_memories(
                cube_id, limit=MAX_TOP_K, offset=offset,
                filters={"metadata": metadata, "status": STATUSES},
            )  # fmt: skip
            yield from page
            if len(page) < MAX_TOP_K:
                return
            offset += MAX_TOP_K

    def _payload(self, cube_id: str, record: MemoryItem) -> Any:
        """The JSON a record holds, its parts joined."""
        data = str(record.metadata.get(DATA, ""))
        if int(record.metadata.get(PARTS, 1)) > 1:
            parts = self._records(cube_id, {KIND: "part", UID: record.metadata[UID]})
            ordered = sorted(parts, key=lambda p: int(p.metadata.get(SEQ, 0)))
            data = "".join(str(p.metadata.get(DATA, "")) for p in ordered) + data
        return json.loads(data)

    def _store(self, cube_id: str, kind: str, label: dict[str, Any], payload: Any) -> None:
        """Write ``payload`` as a record of ``kind`` labelled ``label``: its parts first, then
        the record itself (holding the tail), each sealed ``frozen``."""
        data = json.dumps(payload, separators=(",", ":"))
        uid = uuid.uuid4().hex
        room = max(0, PART_CHARS - len(json.dumps(label)))
        tail = data[-room:] if room else ""
        head = data[: len(data) - len(tail)]
        chunks = [head[i : i + PART_CHARS] for i in range(0, len(head), PART_CHARS)]
        parts = [
            {
                "content": f"langgraph part {n}",
                "metadata": {KIND: "part", UID: uid, SEQ: n, DATA: c},
            }
            for n, c in enumerate(chunks)
        ]
        record = {**label, KIND: kind, UID: uid, PARTS: len(chunks) + 1, DATA: tail}
        messages = [*parts, {"content": f"langgraph {kind}", "metadata": record}]
        for start in range(0, len(messages), ADD_BATCH):
            batch = messages[start : start + ADD_BATCH]
            ids = self.backend.add(batch, cube_id=cube_id)
            for item_id in ids:
                self._seal(cube_id, item_id, "frozen")

    def _seal(self, cube_id: str, item_id: str, status: str) -> None:
        for to in ("activated", status):
            self.backend.transition(item_id, to, cube_id=cube_id)

    def _head(self, cube_id: str, ns: str) -> MemoryItem | None:
        found = self.backend.list_memories(
            cube_id, limit=1, filters={"metadata": {KIND: "head", NS: ns}, "status": STATUSES}
        )
        return found[0] if found else None

    def _advance(self, cube_id: str, ns: str, checkpoint_id: str) -> None:
        """Make ``checkpoint_id`` the namespace's newest when it is newer than the head's."""
        head = self._head(cube_id, ns)
        if head is None:
            head_item = {
                "content": "langgraph head",
                "metadata": {KIND: "head", NS: ns, LATEST: checkpoint_id},
            }
            ids = self.backend.add([head_item], cube_id=cube_id)
            self._seal(cube_id, ids[0], "archived")
        elif checkpoint_id > str(head.metadata.get(LATEST, "")):
            self.backend.update(
                head.id, cube_id=cube_id, metadata={**head.metadata, LATEST: checkpoint_id}
            )

    # -- the saver's calls -------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint (and the channel values of ``new_versions``); its config."""
        conf = config["configurable"]
        thread_id, ns = conf["thread_id"], conf.get("checkpoint_ns", "")
        cube_id = self._cube(thread_id)
        assert cube_id is not None
        saved: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = saved.pop("channel_values", {})
        blobs = {
            ch: [ver, *self._dump(values[ch])] if ch in values else [ver, "empty", ""]
            for ch, ver in new_versions.items()
        }
        label: dict[str, Any] = {
            THREAD: thread_id, NS: ns, ID: checkpoint["id"], PARENT: conf.get("checkpoint_id"),
            **{BLOB + mapping.digest(ch): ver for ch, ver in new_versions.items()},
        }  # fmt: skip
        payload = {
            "checkpoint": self._dump(saved),
            "metadata": self._dump(get_checkpoint_metadata(config, metadata)),
            "blobs": blobs,
        }
        self._store(cube_id, "checkpoint", label, payload)
        self._advance(cube_id, ns, checkpoint["id"])
        if self.messages_key is not None and self.messages_key in new_versions:
            self._flow(thread_id, values.get(self.messages_key))
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes for a checkpoint.  As in LangGraph's reference saver, a
        regular write stored before for ``(task_id, idx)`` is kept, a special one replaced."""
        conf = config["configurable"]
        thread_id, ns = conf["thread_id"], conf.get("checkpoint_ns", "")
        cube_id = self._cube(thread_id)
        assert cube_id is not None
        rows = [
            [WRITES_IDX_MAP.get(ch, idx), ch, *self._dump(value)]
            for idx, (ch, value) in enumerate(writes)
        ]
        label = {THREAD: thread_id, NS: ns, OF: conf["checkpoint_id"]}
        self._store(
            cube_id, "writes", label, {"task_id": task_id, "task_path": task_path, "rows": rows}
        )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the namespace's newest; None when there is none."""
        conf = config["configurable"]
        thread_id, ns = conf["thread_id"], conf.get("checkpoint_ns", "")
        cube_id = self._cube(thread_id, create=False)
        if cube_id is None:
            return None
        checkpoint_id = get_checkpoint_id(config)
        if not checkpoint_id:
            head = self._head(cube_id, ns)
            if head is None:
                return None
            checkpoint_id = str(head.metadata[LATEST])
        found = next(self._records(cube_id, {KIND: "checkpoint", NS: ns, ID: checkpoint_id}), None)
        return None if found is None else self._tuple(cube_id, found)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (by id, per thread and namespace), as the reference saver
        lists them: ``config`` narrows to a thread (and namespace, and checkpoint id),
        ``filter`` to metadata equal to it, ``before`` to older ids, ``limit`` counts."""
        if config is not None:
            cube = self._cube(config["configurable"]["thread_id"], create=False)
            cubes = [] if cube is None else [cube]
            conf = config["configurable"]
        else:
            cubes, conf = self._thread_cubes(), {}
        wanted: dict[str, Any] = {KIND: "checkpoint"}
        if conf.get("checkpoint_ns") is not None:
            wanted[NS] = conf["checkpoint_ns"]
        if conf.get("checkpoint_id"):
            wanted[ID] = conf["checkpoint_id"]
        older = get_checkpoint_id(before) if before else None
        left = limit
        for cube_id in cubes:
            records = [
                r
                for r in self._records(cube_id, wanted)
                if not older or str(r.metadata[ID]) < older
            ]
            records.sort(key=lambda r: (str(r.metadata[NS]), str(r.metadata[ID])), reverse=True)
            for record in records:
                if left is not None and left <= 0:
                    return
                tup = self._tuple(cube_id, record)
                if filter and not all(tup.metadata.get(k) == v for k, v in filter.items()):
                    continue
                if left is not None:
                    left -= 1
                yield tup

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread's cube: every checkpoint and write of it, for good."""
        cube_id = self._cube(thread_id, create=False)
        self._cubes.pop(thread_id, None)
        if cube_id is not None:
            with contextlib.suppress(NotFoundError):  # deleted meanwhile
                self.backend.delete_cube(cube_id)

    # -- async forms: the same logic off the event loop (mapping.Backend.offload) --------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self.backend.offload(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        found = await self.backend.offload(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for tup in found:
            yield tup

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self.backend.offload(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self.backend.offload(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self.backend.offload(self.delete_thread, thread_id)

    # -- reading a checkpoint back -----------------------------------------------------------

    def _tuple(self, cube_id: str, record: MemoryItem) -> CheckpointTuple:
        meta = record.metadata
        thread_id, ns, checkpoint_id = meta[THREAD], str(meta[NS]), str(meta[ID])
        payload = self._payload(cube_id, record)
        checkpoint = self._load(payload["checkpoint"])
        values = self._values(cube_id, ns, checkpoint.get("channel_versions", {}), record, payload)
        parent = meta.get(PARENT)
        return CheckpointTuple(
            config={
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": checkpoint_id,
                }
            },
            checkpoint=cast(Checkpoint, {**checkpoint, "channel_values": values}),
            metadata=self._load(payload["metadata"]),
            parent_config=(
                {
                    "configurable": {
                        "thread_id": thread_id,
                        "checkpoint_ns": ns,
                        "checkpoint_id": parent,
                    }
                }
                if parent
                else None
            ),
            pending_writes=self._writes(cube_id, ns, checkpoint_id),
        )

    def _values(
        self,
        cube_id: str,
        ns: str,
        versions: ChannelVersions,
        record: MemoryItem,
        payload: Any,
    ) -> dict[str, Any]:
        """Each channel's value at its version: from this record, else from the record that
        stored that version."""
        values: dict[str, Any] = {}
        for ch, ver in versions.items():
            blob = payload["blobs"].get(ch)
            if blob is None or blob[0] != ver:
                key = BLOB + mapping.digest(ch)
                holder = None
                for other in self._records(cube_id, {KIND: "checkpoint", NS: ns, key: ver}):
                    holder = other  # the newest write of that version wins, as in the reference
                if holder is None or holder.id == record.id:
                    continue
                blob = self._payload(cube_id, holder)["blobs"].get(ch)
            if blob is not None and blob[1] != "empty":
                values[ch] = self._load(blob[1:])
        return values

    def _writes(self, cube_id: str, ns: str, checkpoint_id: str) -> builtins.list[PendingWrite]:
        kept: dict[tuple[str, int], tuple[str, str, builtins.list[Any], str]] = {}
        for record in self._records(cube_id, {KIND: "writes", NS: ns, OF: checkpoint_id}):
            payload = self._payload(cube_id, record)
            task_id, task_path = payload["task_id"], payload["task_path"]
            for idx, ch, *typed in payload["rows"]:
                if idx >= 0 and (task_id, idx) in kept:
                    continue
                kept[(task_id, idx)] = (task_id, ch, typed, task_path)
        order = sorted(kept, key=lambda k: writes_sort_key(kept[k][3], *k))
        return [(kept[k][0], kept[k][1], self._load(kept[k][2])) for k in order]

    def _dump(self, value: Any) -> builtins.list[str]:
        kind, data = self.serde.dumps_typed(value)
        return [kind, base64.b64encode(data).decode("ascii")]

    def _load(self, typed: Sequence[str]) -> Any:
        return self.serde.loads_typed((typed[0], base64.b64decode(typed[1])))

    # -- messages into memory ----------------------------------------------------------------

    def _flow(self, thread_id: str, messages: Any) -> None:
        """Add the thread's messages not added yet to the memory cube, as turns."""
        if not isinstance(messages, list):
            return
        session = mapping.line_id(str(thread_id), "lg")
        new = [t for m in messages if (t := turn_of(m)) is not None and t["id"] not in self._flowed]
        if not new:
            return
        try:
            self.backend.add(new, cube_id=self.cube_id, session_id=session)
        except ConflictError:
            # A message edited after it was added: add the others one by one, keep the first.
            for turn in new:
                try:
                    self.backend.add([turn], cube_id=self.cube_id, session_id=session)
                except ConflictError:
                    continue
        for turn in new:
            self._flowed[turn["id"]] = None
        while len(self._flowed) > REMEMBERED:
            self._flowed.popitem(last=False)
