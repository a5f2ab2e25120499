"""The layer test's reader of imports, on small package trees made for it: it sees
imports deferred into functions, relative imports and type-only imports, and reports
an upward import and a cycle that a deferred import closes."""

from __future__ import annotations

from pathlib import Path

from tests.shape.imports import find_cycles, module_imports, read_layer_table, upward_imports

TABLE_DOC = """\
# layers

## Layers

| package | what | imports (ours) |
|---|---|---|
| `low/` | the bottom | nothing |
| `high/` | on top | `low` |

## Next section

| `ignored/` | x | `low` |
"""


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_table_is_read_from_its_section_only() -> None:
    assert read_layer_table(TABLE_DOC) == {"low": set(), "high": {"low"}}


def test_a_deferred_upward_import_is_reported_with_its_place(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "low/__init__.py": "",
        "low/core.py": "def f():\n    from high import shell\n    return shell\n",
        "high/__init__.py": "",
        "high/shell.py": "from low import core\n",
    })
    wrong = upward_imports(module_imports(root, ["low", "high"]), read_layer_table(TABLE_DOC))
    assert [str(imp) for imp in wrong] == [
        "low/core.py:2: low.core imports high (deferred)",
        "low/core.py:2: low.core imports high.shell (deferred)",
    ]


def test_a_type_only_upward_import_is_reported(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "low/__init__.py": "",
        "low/core.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                       "    import high.shell\n",
        "high/__init__.py": "",
        "high/shell.py": "",
    })
    wrong = upward_imports(module_imports(root, ["low", "high"]), read_layer_table(TABLE_DOC))
    assert {(imp.target, imp.type_only) for imp in wrong} == {("high", True),
                                                              ("high.shell", True)}


def test_a_cycle_closed_by_a_deferred_relative_import_is_found(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "low/__init__.py": "",
        "low/a.py": "from low import b\n",
        "low/b.py": "def g():\n    from .a import x\n    return x\n",
        "low/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from low import a\n",
    })
    imports = module_imports(root, ["low"])
    assert find_cycles([(i.source, i.target) for i in imports if not i.type_only]) == [
        ["low.a", "low.b"]]


def test_a_package_init_that_imports_its_importer_is_a_cycle(tmp_path: Path) -> None:
    """``from low.pkg.part import x`` runs ``low/pkg/__init__`` first."""
    root = _tree(tmp_path, {
        "low/__init__.py": "",
        "low/pkg/__init__.py": "from low import user\n",
        "low/pkg/part.py": "",
        "low/user.py": "def f():\n    from low.pkg.part import x\n",
    })
    imports = module_imports(root, ["low"])
    assert find_cycles([(i.source, i.target) for i in imports]) == [["low.pkg", "low.user"]]
