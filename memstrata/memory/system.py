"""``MemoryOS``: the one core every surface (SDK, CLI, REST, MCP) calls.

Every public method takes the acting user (``user_id=`` or ``by=``) and checks the grants of the
cube it touches before doing anything: ``read`` to search or get, ``write`` to add, update or
delete, ``admin`` to grant or re-embed.  Input is validated completely before the first write, so
an error leaves the database as it was.  Thread-safe: a server may share one instance.

This class opens and closes the parts and names the calls; each call is written once, in the
part that owns its concern (see ``memory.delegate``):

=====================  ==========================================================================
``memory.principals``  users, API keys, cubes, grants, statistics, runtime settings
``memory.items``       add, add_document, list, get, update, delete, history, re-embed
``memory.reading``     search (live and as of a time), context, profile, preferences, recall
``memory.chat``        chat and chat_stream
``memory.governance``  transitions, rollback, audit, erasure, MemCube export and import
``memory.background``  wait, tasks, retry a failed task, consolidate, artifacts, KV cache, LoRA
``memory.feedback``    feedback: a correction, a confirmation, "that's wrong", "forget that"
``memory.expiry``      expire: erase what has expired now (the ``expire`` task does it anyway)
``memory.skills``      end_task: a skill distilled from a task that ended well, demoted by one
                       that failed (tool calls, images and files: ``memory.structured``)
``memory.structured``  get_image: the bytes of an image a message sent (``memory.media``)
=====================  ==========================================================================
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from memstrata.closing import Closing
from memstrata.config import Settings
from memstrata.embed import DEFAULT_EMBEDDER, Closeable, Embedder, make_embedder
from memstrata.llm import LLM, OpenAIChat, make_llm
from memstrata.memory.access import Access
from memstrata.memory.activation import ActivationMemory
from memstrata.memory.background import Background
from memstrata.memory.chat import Chat
from memstrata.memory.components import Components
from memstrata.memory.delegate import Delegate
from memstrata.memory.expiry import Expiry, ExpiryTasks
from memstrata.memory.feedback import Feedback
from memstrata.memory.governance import Governance
from memstrata.memory.indexing import IndexTasks
from memstrata.memory.items import Items
from memstrata.memory.parametric import ParametricMemory
from memstrata.memory.principals import Principals
from memstrata.memory.reading import Reading
from memstrata.memory.skills import Skills
from memstrata.memory.structured import Images
from memstrata.scheduler import Scheduler, TaskQueue
from memstrata.store.base import Store
from memstrata.store.engines import open_queue, open_store
from memstrata.tiers.tasks import TierTasks

__all__ = ["MemoryOS"]

log = logging.getLogger("memstrata")
#: Seconds ``close`` lets running background tasks finish before it releases them: within a
#: service manager's stop timeout (``memstrata serve`` exits within 15 s of SIGTERM).
TASKS_GRACE_S = 5.0


class MemoryOS(Closing):
    """Long-term memory for agents: users, cubes, grants, add, search, get, update, history."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        settings: Settings,
        *,
        queue: TaskQueue,
        owns_embedder: bool = False,
        llm: LLM | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self._owns_embedder = owns_embedder
        #: the chat model (chat, and the ``llm`` reader when chosen); None without one; closed here
        self.llm = llm
        self.scheduler = Scheduler(
            queue,
            workers=settings.workers,
            lease_s=settings.task_lease_s,
            queue_only=settings.queue_only,
        )
        # The chat model also reads hot segments only when the llm reader is chosen.
        reader_llm = llm if settings.reader == "llm" else None
        self.tiers = TierTasks(store, embedder, self.scheduler, llm=reader_llm)
        access = Access(store, embedder)
        index = IndexTasks(store, self.scheduler)
        activation = ActivationMemory(store, self.scheduler, llm, settings.activation_tokens)
        parametric = ParametricMemory(store, self.scheduler, settings.llm_model_path)
        parts = Components(
            store, embedder, settings, llm, self.scheduler, self.tiers, access, index, activation,
            parametric,
        )  # fmt: skip
        self._parts = parts
        self._principals = Principals(parts)
        self._items = Items(parts)
        self._reading = Reading(parts)
        self._chat = Chat(parts, self._reading, self._items)
        self._governance = Governance(parts, self._items)
        self._background = Background(parts)
        #: the ``expire`` task and the sweep that queues it (``memory.expiry``)
        self.expiry_tasks = ExpiryTasks(
            store, self.scheduler, parts.forget, settings.expiry_sweep_s
        )
        self._expiry = Expiry(parts, self.expiry_tasks)
        self._feedback = Feedback(parts, self._items)
        self._skills = Skills(parts, self._items)
        self._images = Images(parts)
        self.scheduler.start()

    @property
    def settings(self) -> Settings:
        """The settings in force (``configure`` replaces them)."""
        return self._parts.settings

    @classmethod
    def open(
        cls,
        path: str | None = None,
        *,
        embedder: str | Embedder | None = None,
        settings: Settings | None = None,
        **overrides: Any,
    ) -> MemoryOS:
        """Open (creating if missing) the database at ``path``: an SQLite file, or a PostgreSQL
        server's database (``postgresql://…``; docs/deploy.md).

        ``embedder`` is a name (``e5``, ``use``, ``minilm``, ``openai``) or an ``Embedder``; when
        omitted, the embedder the file was created with is used (``e5`` for a new file).  Other
        keyword arguments override ``Settings`` fields (``redis_url`` puts the task queue on
        Redis).  Raises ``NotOurDatabase`` or ``SchemaTooNew`` for databases it must not touch,
        ``StorageError`` for a server it cannot reach.
        """
        # An instance is told apart from a name without isinstance(…, Embedder): on Python
        # 3.11 that would evaluate ``dim``, which for a remote embedder is a request.
        given = None if embedder is None or isinstance(embedder, str) else embedder
        name = embedder if isinstance(embedder, str) else None
        base = settings or Settings.load()
        overrides = {"db": path, "embedder": name, **overrides}
        settings = Settings.from_mapping(
            {**vars(base), **{k: v for k, v in overrides.items() if v is not None}}
        )
        store = open_store(settings)
        try:
            recorded = store.get_meta("embedder")
            chosen = given.name if given else settings.embedder or recorded or DEFAULT_EMBEDDER
            instance = given or make_embedder(chosen, settings)
            if recorded is None:
                store.set_meta("embedder", chosen)
            settings = replace(settings, embedder=chosen)
            queue = open_queue(settings, store)
            llm = make_llm(settings)
        except BaseException:
            store.close()
            raise
        if isinstance(llm, OpenAIChat) and (problem := llm.probe()) is not None:
            # Not fatal: add and search need no model, and promotion falls back to the rules.
            log.warning("the chat model's endpoint is not available: %s", problem)
        return cls(store, instance, settings, queue=queue, owns_embedder=given is None, llm=llm)

    def close(self) -> None:
        """Flush read counts, stop the workers, close the queue, the store (and the embedder
        ``open`` made).

        The buffered read counts are queued (a ``visits`` task, run by the next process on this
        file when workers are on).  Background tasks still running get ``TASKS_GRACE_S`` seconds
        to finish; one that has not is released (``pending`` again, its attempt not counted) and
        runs from the start in the next process; its handler, left behind, ends quietly against
        the closed store.  Nothing is left ``running``.  Stop the calls in flight first.
        """
        try:
            self.expiry_tasks.close()
            self.tiers.flush_reads(force=True)
        finally:
            self.scheduler.close(timeout=TASKS_GRACE_S)
            if isinstance(self.scheduler.queue, Closeable):  # a Redis queue's connections
                self.scheduler.queue.close()
            self.store.close()
            if self.llm is not None:
                self.llm.close()
            self._parts.parametric.close()
            if self._owns_embedder and isinstance(self.embedder, Closeable):
                self.embedder.close()

    # -- users, keys, cubes, grants, settings (memory.principals) ----------------------------
    RUNTIME_SETTINGS = Principals.RUNTIME_SETTINGS
    create_user = Delegate("_principals", Principals.create_user)
    list_users = Delegate("_principals", Principals.list_users)
    get_user = Delegate("_principals", Principals.get_user)
    create_key = Delegate("_principals", Principals.create_key)
    list_keys = Delegate("_principals", Principals.list_keys)
    revoke_key = Delegate("_principals", Principals.revoke_key)
    authenticate = Delegate("_principals", Principals.authenticate)
    bootstrap_admin = Delegate("_principals", Principals.bootstrap_admin)
    create_cube = Delegate("_principals", Principals.create_cube)
    get_cube = Delegate("_principals", Principals.get_cube)
    default_cube = Delegate("_principals", Principals.default_cube)
    attach = Delegate("_principals", Principals.attach)
    delete_cube = Delegate("_principals", Principals.delete_cube)
    list_cubes = Delegate("_principals", Principals.list_cubes)
    grant = Delegate("_principals", Principals.grant)
    share = Delegate("_principals", Principals.share)
    revoke = Delegate("_principals", Principals.revoke)
    grants = Delegate("_principals", Principals.grants)
    stats = Delegate("_principals", Principals.stats)
    llm_usage_by_day = Delegate("_principals", Principals.llm_usage_by_day)
    configure = Delegate("_principals", Principals.configure)

    # -- items (memory.items) ----------------------------------------------------------------
    add = Delegate("_items", Items.add)
    add_document = Delegate("_items", Items.add_document)
    list_memories = Delegate("_items", Items.list_memories)
    get = Delegate("_items", Items.get)
    update = Delegate("_items", Items.update)
    delete = Delegate("_items", Items.delete)
    history = Delegate("_items", Items.history)
    cited_by = Delegate("_items", Items.cited_by)
    reembed = Delegate("_items", Items.reembed)

    # -- reading (memory.reading) and chat (memory.chat) -------------------------------------
    search = Delegate("_reading", Reading.search)
    context = Delegate("_reading", Reading.context)
    recall = Delegate("_reading", Reading.recall)
    get_profile = Delegate("_reading", Reading.get_profile)
    get_preferences = Delegate("_reading", Reading.get_preferences)
    profile_summary = Delegate("_reading", Reading.profile_summary)
    chat = Delegate("_chat", Chat.chat)
    chat_stream = Delegate("_chat", Chat.chat_stream)

    # -- lifecycle and governance (memory.governance) ----------------------------------------
    audit = Delegate("_governance", Governance.audit)
    erase = Delegate("_governance", Governance.erase)
    vacuum = Delegate("_governance", Governance.vacuum)
    transition = Delegate("_governance", Governance.transition)
    rollback = Delegate("_governance", Governance.rollback)
    export = Delegate("_governance", Governance.export)
    import_cube = Delegate("_governance", Governance.import_cube)

    # -- background work (memory.background) -------------------------------------------------
    wait = Delegate("_background", Background.wait)
    tasks = Delegate("_background", Background.tasks)
    retry_task = Delegate("_background", Background.retry_task)
    may_retry = Delegate("_background", Background.may_retry)
    consolidate = Delegate("_background", Background.consolidate)
    artifacts = Delegate("_background", Background.artifacts)
    build_activation = Delegate("_background", Background.build_activation)
    queue_adapter = Delegate("_background", Background.queue_adapter)
    train_adapter = Delegate("_background", Background.train_adapter)
    generate_with_adapter = Delegate("_background", Background.generate_with_adapter)

    # -- truth over time: corrections (memory.feedback) and expiry (memory.expiry) -----------
    feedback = Delegate("_feedback", Feedback.feedback)
    expire = Delegate("_expiry", Expiry.expire)

    # -- skill memory (memory.skills), images (memory.structured) ----------------------------
    end_task = Delegate("_skills", Skills.end_task)
    get_image = Delegate("_images", Images.get_image)
