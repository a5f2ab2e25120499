"""Every import of our own modules, read from the source, and what is wrong with them.

Why read the source rather than import it: an import deferred into a function runs
only when the function does, so importing a module shows none of them, and they are
where cycles hide. The AST shows every ``import``, at the top, inside functions and
under ``if TYPE_CHECKING:``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Import", "find_cycles", "module_imports", "read_layer_table", "upward_imports"]


@dataclass(frozen=True)
class Import:
    """`source` imports `target` (both module names) at `path`:`line`."""

    source: str
    target: str
    path: str
    line: int
    deferred: bool  # inside a function
    type_only: bool  # under ``if TYPE_CHECKING:``

    def __str__(self) -> str:
        how = " (deferred)" if self.deferred else " (type only)" if self.type_only else ""
        return f"{self.path}:{self.line}: {self.source} imports {self.target}{how}"


def _modules(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _known(name: str, modules: Mapping[str, Path]) -> str | None:
    """The longest prefix of `name` that is one of our modules."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return any((isinstance(n, ast.Name) and n.id == "TYPE_CHECKING")
               or (isinstance(n, ast.Attribute) and n.attr == "TYPE_CHECKING")
               for n in ast.walk(test))


class _ModuleReader:
    """The imports of one module, walked statement by statement."""

    def __init__(self, name: str, path: Path, rel: str, modules: Mapping[str, Path]) -> None:
        self.name, self.rel, self.modules = name, rel, modules
        parts = name.split(".")
        #: the package a relative import starts from
        self.package = parts if path.name == "__init__.py" else parts[:-1]
        #: packages Python has started before this module runs
        self.ancestors = {".".join(parts[:i]) for i in range(1, len(parts))}
        self.found: list[Import] = []

    def add(self, name: str, node: ast.stmt, deferred: bool, type_only: bool) -> None:
        known = _known(name, self.modules)
        if known is None:
            return
        parts = known.split(".")
        for i in range(1, len(parts) + 1):
            target = ".".join(parts[:i])
            if target != self.name and target not in self.ancestors and target in self.modules:
                self.found.append(Import(self.name, target, self.rel, node.lineno, deferred,
                                         type_only))

    def visit(self, node: ast.AST, deferred: bool, type_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    self.add(alias.name, child, deferred, type_only)
            elif isinstance(child, ast.ImportFrom):
                base = self.package[:len(self.package) - child.level + 1] if child.level else []
                module = ".".join([*base, *([child.module] if child.module else [])])
                for alias in child.names:
                    self.add(f"{module}.{alias.name}", child, deferred, type_only)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    self.visit(ast.Module(body=[stmt], type_ignores=[]), deferred, True)
                for stmt in child.orelse:
                    self.visit(ast.Module(body=[stmt], type_ignores=[]), deferred, type_only)
            else:
                inner = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
                self.visit(child, deferred or inner, type_only)


def module_imports(root: Path, packages: Iterable[str]) -> list[Import]:
    """Every import from a module of `packages` (directories under `root`) of another
    module of theirs. Importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``,
    so those count as imported too, except the importer's own enclosing packages, which
    Python has already started by the time the importer runs."""
    modules = _modules(root, packages)
    out: list[Import] = []
    for name, path in modules.items():
        reader = _ModuleReader(name, path, str(path.relative_to(root)), modules)
        reader.visit(ast.parse(path.read_text(), str(path)), False, False)
        out.extend(dict.fromkeys(reader.found))  # ``from a import b, c``: one of each
    return out


def read_layer_table(markdown: str, heading: str = "## Layers") -> dict[str, set[str]]:
    """The table under `heading`: each package (first column) and the packages its
    last column names (``nothing`` for none)."""
    section = markdown.split(heading, 1)[1].split("\n## ", 1)[0]
    table: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        package = cells[0].strip("`").rstrip("/")
        table[package] = set(re.findall(r"`([\w.]+)/?`", cells[-1]))
    return table


def upward_imports(imports: Iterable[Import], table: Mapping[str, set[str]]) -> list[Import]:
    """The imports from one package into another that its row does not name."""
    bad = []
    for imp in imports:
        source, target = imp.source.split(".")[0], imp.target.split(".")[0]
        if source != target and target not in table.get(source, set()):
            bad.append(imp)
    return bad


def find_cycles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles
