"""Reading back the terms a node pickled to disk, after the code's modules moved.

A pickle names each object's class by its module path, and the WAL, segments,
snapshots and log metadata outlive upgrades: a store written before a module
moved must still load. Upper layers say where their modules went
(`register_module_renames`), since the log stack knows nothing of what the
machines it serves put in their entries. The plain `pickle.loads` stays the
fast path; only a term naming a module that no longer exists (or no longer holds
the class) is read again through the table.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Mapping
from typing import Any, BinaryIO

__all__ = ["load", "loads", "register_module_renames"]

_RENAMES: dict[str, str] = {}


def register_module_renames(renames: Mapping[str, str]) -> None:
    """Old module path -> the module that now defines its classes."""
    _RENAMES.update(renames)


class _Renaming(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(_RENAMES.get(module, module), name)


def loads(data: bytes | memoryview) -> Any:
    """`pickle.loads`, reading classes of moved modules where they are now."""
    try:
        return pickle.loads(data)
    except (ModuleNotFoundError, AttributeError):
        if not _RENAMES:
            raise
        return _Renaming(io.BytesIO(data)).load()


def load(f: BinaryIO) -> Any:
    """`pickle.load` of a whole file, as `loads` reads it."""
    return loads(f.read())
