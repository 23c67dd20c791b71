"""MemCube: one cube as plain files, the interchange format of docs/memcube.md.

A MemCube is a directory, or a gzipped tar of that directory's files::

    cube.json          manifest: format and version, the cube, the embedder, counts, SHA-256 of the rest
    items.jsonl        one line per item (id order), each with every stored version of it
    vectors.npy        float32 matrix (numpy .npy, no pickle): row i is the vector of ids[i]
    vectors.ids.json   ids: the item id of each row of vectors.npy
    events.jsonl       the cube's audit events, oldest first
    artifacts.jsonl    one line per artifact (KV cache, LoRA adapter), naming its file
    artifacts/NAME     the artifacts' files (only when there are artifacts)

This package converts between those files and model objects (``records``), writes and reads
them (``files``, checking each field with ``fields``), moves a cube to new ids (``remap``) and
gives the users it names to an importer, keeping what it said as provenance (``claims``).  It
never touches a database (see the store's ``ArchiveStore`` methods) and never unpickles.
"""

from memstrata.memcube.claims import ORIGIN, named_users, reclaim
from memstrata.memcube.fields import ID_PATTERN
from memstrata.memcube.files import open_cube, write_cube
from memstrata.memcube.records import (
    FORMAT,
    FORMAT_VERSION,
    ITEM_FIELDS,
    Artifact,
    Manifest,
    MemCube,
    Vectors,
)
from memstrata.memcube.remap import rehome

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "ID_PATTERN",
    "ITEM_FIELDS",
    "ORIGIN",
    "Artifact",
    "Manifest",
    "MemCube",
    "Vectors",
    "named_users",
    "open_cube",
    "reclaim",
    "rehome",
    "write_cube",
]
