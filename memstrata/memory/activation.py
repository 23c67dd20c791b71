"""Activation memory: a cube's stable context, prefilled once, kept as a KV cache.

A cube's **stable context** is what changes slowly: its current profile attributes, its pinned
long-tier items, then its newest long-tier facts, preferences and knowledge, rendered as the
packed context renders them, up to ``activation_tokens`` tokens.  The chat prompt begins with it
(``retrieval.prompt``), so the in-process local model can start from a saved state instead of
reading it again:

* ``build`` (the ``activation`` task) prefills the model with the prompt's stable start and stores
  the state as a ``kv_cache`` artifact of the cube: a file holding a JSON header (format, the
  model's fingerprint, the exact token ids, the source items' ids and versions) and then the
  state bytes, never pickle.  Older ``kv_cache`` artifacts of the cube are deleted after it.
* ``lookup`` finds the artifact whose fingerprint is that of the stable context *as it is now*
  (the model's fingerprint and the stable prompt's sha256): after a profile change, a pin or a
  new fact the fingerprint differs, the old artifact is never used, and ``chat`` queues a
  rebuild.  The artifact is read, never written, by a chat.
* Only an artifact this server sealed is loaded (``memory.artifacts.Seal``): ``build`` stores it
  with a MAC, and ``find`` deletes one whose MAC does not verify over the bytes it read (a
  planted or changed file, one made before seals) and answers None, so a rebuild is queued.  A
  fingerprint is no proof of origin: it names public things.  An import never brings a
  ``kv_cache`` artifact in (``memory.cubes``).
* Erasure in a cube deletes its ``kv_cache`` artifacts (the state was computed from the erased
  words); deleting the cube deletes its files.

Only a local model (``LocalChat``) has a state to save; with any other model, or with
``activation_tokens`` 0, nothing here runs.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass

from memstrata.errors import MemCubeError, StorageError
from memstrata.filters import Filters
from memstrata.llm.local import Activation, LocalChat
from memstrata.memcube import Artifact
from memstrata.memory import artifacts
from memstrata.model import MemoryItem
from memstrata.retrieval.pack import profile_line, render
from memstrata.retrieval.prompt import prefill_messages, stable_prefix
from memstrata.scheduler import Scheduler, Task
from memstrata.store.base import ArtifactStore, ItemStore, ModelStateStore
from memstrata.text import count_tokens

KIND = "kv_cache"
#: The artifact file's format name, first in its header.
FORMAT = "memstrata-kv/1"
#: Long-tier types a stable context shows (segments and turns are not stable), profile first.
STABLE_TYPES = ("profile", "fact", "preference", "knowledge")
#: The most non-profile items a stable context reads (newest first).
NEWEST = 1000


@dataclass(frozen=True)
class Stable:
    """A cube's stable context: its text and the (item id, version) of every item in it."""

    text: str
    sources: tuple[tuple[str, int], ...]


def stable_context(store: ItemStore, cube_id: str, budget_tokens: int) -> Stable:
    """The stable context of ``cube_id`` within ``budget_tokens`` (see the module docstring)."""
    profile = sorted(
        (i for i in store.list_items(cube_id, Filters(tiers=("long",), types=("profile",)))
         if i.valid_to is None),
        key=lambda i: (i.key or "", i.id),
    )  # fmt: skip
    # A line is at least a few tokens: the newest NEWEST items always fill the budget.
    newest = Filters(tiers=("long",), types=STABLE_TYPES[1:])
    rest = [
        i
        for i in store.list_items(cube_id, newest, descending=True, limit=NEWEST)
        if i.valid_to is None
    ]  # newest first
    others = [i for i in rest if i.pinned] + [i for i in rest if not i.pinned]
    lines: list[str] = []
    used: list[MemoryItem] = []
    spent = 0
    for item, line in [(i, profile_line(i.text)) for i in profile] + [
        (i, render(i)) for i in others
    ]:
        cost = count_tokens(line)
        if not line or spent + cost > budget_tokens:
            continue
        lines.append(line)
        used.append(item)
        spent += cost
    return Stable("\n".join(lines), tuple((i.id, i.version) for i in used))


def fingerprint(model: str, stable: Stable) -> str:
    """The artifact fingerprint of ``stable`` for the model fingerprinted ``model``."""
    digest = hashlib.sha256(f"{model}\n{stable_prefix(stable.text)}".encode()).hexdigest()
    return f"{FORMAT}:{digest}"


class ActivationMemory:
    """Builds and finds a cube's ``kv_cache`` artifact; registers the ``activation``
    task on ``scheduler``."""

    def __init__(
        self, store: ModelStateStore, scheduler: Scheduler, llm: object, budget_tokens: int
    ) -> None:
        self.store = store
        self.scheduler = scheduler
        #: the local model, or None: nothing to prefill without one
        self.llm = llm if isinstance(llm, LocalChat) and _has_folder(store) else None
        self.budget_tokens = budget_tokens
        #: the last state read from a file (its MAC verified), by artifact id: a chat reads the
        #: same one again
        self._last: tuple[str, Activation] | None = None
        self.seal = artifacts.Seal(store)
        scheduler.register("activation", self._task)

    @property
    def enabled(self) -> bool:
        """Whether chats use (and tasks build) activation memory: a local model, a budget, and
        a store that keeps artifact files (a PostgreSQL store needs ``artifacts_dir``)."""
        return self.llm is not None and self.budget_tokens > 0

    def stable(self, cube_id: str) -> Stable:
        """The stable context of ``cube_id`` now ("" when activation memory is off)."""
        if not self.enabled:
            return Stable("", ())
        return stable_context(self.store, cube_id, self.budget_tokens)

    def lookup(self, cube_id: str, stable: Stable) -> tuple[Artifact, Activation] | None:
        """The artifact made from ``stable`` exactly, and its state; None when there is none
        (a rebuild is queued; run inline, it is built here and used at once)."""
        if self.llm is None or not stable.text:
            return None
        wanted = fingerprint(self.llm.fingerprint(), stable)
        found = self.find(cube_id, wanted)
        if found is None:
            self.queue(cube_id)
            if self.scheduler.inline:  # the task has just run in this thread
                found = self.find(cube_id, wanted)
        return found

    def find(self, cube_id: str, wanted: str) -> tuple[Artifact, Activation] | None:
        """The cube's artifact of fingerprint ``wanted`` and its state: what a chat loads into
        the model.  One that is not sealed by this server (its MAC does not verify over the
        bytes read) or not a KV cache is deleted, so that the rebuild makes it again, and None
        returned."""
        for artifact in self.store.artifacts(cube_id, KIND):
            if artifact.fingerprint != wanted:
                continue
            if self._last is not None and self._last[0] == artifact.artifact_id:
                return artifact, self._last[1]
            data = self.seal.open(cube_id, artifact)
            if data is None:
                return None  # deleted
            try:
                state = decode(artifact.artifact_id, data)
            except StorageError:
                self.store.delete_artifacts(cube_id, [artifact.artifact_id])
                return None
            self._last = (artifact.artifact_id, state)
            return artifact, state
        return None

    def queue(self, cube_id: str) -> None:
        """Queue the cube's rebuild (deduplicated; a no-op when activation memory is off)."""
        if self.enabled:
            self.scheduler.submit(
                "activation", {}, cube_id=cube_id, dedupe_key=f"activation:{cube_id}"
            )

    def build(self, cube_id: str) -> Artifact | None:
        """Make the cube's artifact for its stable context now, unless it exists; delete the
        cube's other ``kv_cache`` artifacts.  None when there is nothing stable (or no model)."""
        stable = self.stable(cube_id)
        existing = self.store.artifacts(cube_id, KIND)
        made: Artifact | None = None
        if self.llm is not None and stable.text:
            model = self.llm.fingerprint()
            wanted = fingerprint(model, stable)
            made = next((a for a in existing if self._sealed(cube_id, a, wanted)), None)
            if made is None:
                activation = self.llm.prefill(prefill_messages(stable.text))
                header = {
                    "format": FORMAT,
                    "model": model,
                    "tokens": list(activation.tokens),
                    "sources": [list(s) for s in stable.sources],
                }
                metadata = {
                    "model": model,
                    "tokens": len(activation.tokens),
                    "sources": [list(s) for s in stable.sources],
                }
                made = self.seal.put(
                    cube_id, KIND, wanted, encode(header, activation.state), metadata
                )
        artifacts.keep_only(self.store, cube_id, existing, made)
        return made

    def _sealed(self, cube_id: str, artifact: Artifact, wanted: str) -> bool:
        """Whether ``artifact`` is the one wanted, sealed by this server (one that is not is
        deleted)."""
        return artifact.fingerprint == wanted and self.seal.open(cube_id, artifact) is not None

    def _task(self, task: Task) -> None:
        """Task ``activation``: ``build`` for the task's cube (nothing for a cube gone)."""
        if task.cube_id is not None and self.store.get_cube(task.cube_id) is not None:
            self.build(task.cube_id)


def encode(header: Mapping[str, object], state: bytes) -> bytes:
    """An artifact file: the header's length (8 bytes, little-endian), the header as JSON,
    then the state bytes."""
    text = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text + state


def read_state(artifact: Artifact) -> Activation:
    """The ``Activation`` stored in ``artifact``'s file; ``StorageError`` if it is not one.
    Its seal is not checked: for files this process wrote itself (the activation benchmark);
    a chat loads only what ``ActivationMemory.find`` gives."""
    return decode(artifact.artifact_id, artifact.path.read_bytes())


def decode(artifact_id: str, data: bytes) -> Activation:
    """The ``Activation`` a KV cache file's bytes ``data`` hold; ``StorageError`` if they are
    not one."""
    try:
        (length,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + length])
        if header.get("format") != FORMAT:
            raise ValueError(f"format {header.get('format')!r}")
        tokens = tuple(int(t) for t in header["tokens"])
    except (struct.error, ValueError, KeyError, TypeError) as exc:
        raise StorageError(f"artifact {artifact_id} is not a KV cache: {exc}") from exc
    return Activation(tokens, data[8 + length :])


def _has_folder(store: ArtifactStore) -> bool:
    """Whether ``store`` keeps artifact files (not an in-memory SQLite, not PostgreSQL without
    ``artifacts_dir``)."""
    try:
        store.artifact_dir("probe")
    except MemCubeError:
        return False
    return True
