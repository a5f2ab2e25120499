"""The packages depend on each other only as docs/architecture.md's layer table says,
and no modules import each other in a circle, deferred imports included.

The table in the docs is the only statement of the layers: this test reads it, so
changing a layer means changing the docs. An import inside a function counts like any
other (that is where cycles hide), and so does one made only for type annotations.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from tests.shape.imports import find_cycles, module_imports, read_layer_table, upward_imports

ROOT = Path(__file__).resolve().parents[2]
TABLE = read_layer_table((ROOT / "docs" / "architecture.md").read_text())


def _our_packages() -> set[str]:
    """The packages warren installs (pyproject's package list, without the globs)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}


IMPORTS = module_imports(ROOT, sorted(_our_packages()))


def test_every_installed_package_has_a_row_and_every_row_a_package() -> None:
    assert set(TABLE) == _our_packages()


def test_the_table_names_only_its_own_packages() -> None:
    named = set().union(*TABLE.values())
    assert named <= set(TABLE)


def test_the_layer_table_itself_has_no_cycle() -> None:
    edges = [(package, dep) for package, deps in TABLE.items() for dep in deps]
    assert find_cycles(edges) == []


def test_imports_only_go_down_the_layer_table() -> None:
    wrong = [str(imp) for imp in upward_imports(IMPORTS, TABLE)]
    assert wrong == []


def test_no_modules_import_each_other_in_a_circle() -> None:
    """Imports under ``if TYPE_CHECKING:`` never run, so they close no circle."""
    edges = [(imp.source, imp.target) for imp in IMPORTS if not imp.type_only]
    cycles = find_cycles(edges)
    shown = [" -> ".join(cycle) + ": " + "; ".join(
        str(imp) for imp in IMPORTS
        if imp.source in cycle and imp.target in cycle and not imp.type_only)
        for cycle in cycles]
    assert shown == []
