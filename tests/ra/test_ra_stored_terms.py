"""Terms stored on disk load after the module that defined their class moved."""

from __future__ import annotations

import pickle
from collections import OrderedDict

import pytest

from ra import stored_terms


def _naming(old_module: str, value: object) -> bytes:
    """`value` pickled as if its class lived in `old_module` (protocol 2 names
    classes in text, so the module can be swapped)."""
    blob = pickle.dumps(value, protocol=2)
    return blob.replace(b"ccollections\nOrderedDict", f"c{old_module}\nOrderedDict".encode())


def test_a_term_naming_a_module_that_is_gone_loads_from_where_it_moved() -> None:
    old = _naming("warren_test_gone_module", OrderedDict(a=1))
    with pytest.raises(ModuleNotFoundError):
        pickle.loads(old)
    stored_terms.register_module_renames({"warren_test_gone_module": "collections"})
    assert stored_terms.loads(old) == OrderedDict(a=1)


def test_a_term_naming_a_module_that_no_longer_holds_the_class_loads_too() -> None:
    old = _naming("json", OrderedDict(b=2))  # json exists, but has no OrderedDict
    with pytest.raises(AttributeError):
        pickle.loads(old)
    stored_terms.register_module_renames({"json": "collections"})
    try:
        assert stored_terms.loads(old) == OrderedDict(b=2)
    finally:
        del stored_terms._RENAMES["json"]


def test_terms_of_modules_that_did_not_move_load_as_pickle_loads_them() -> None:
    assert stored_terms.loads(pickle.dumps({"k": (1, "v")}, protocol=5)) == {"k": (1, "v")}
