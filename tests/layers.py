"""The import graph of txamqp09, read from its source, and the two rules it
keeps: no circles inside a package, and no import of a layer that stands
above.

The graph is read with :mod:`ast`, never by importing: every ``import`` and
``from ... import`` of a txamqp09 module counts, wherever it stands (at the
top, under ``TYPE_CHECKING``, inside a function). ``from package import
name`` is an import of the submodule when *name* is one, of the package's
``__init__`` otherwise.

The layers are the drawing in ``docs/architecture.rst``: its first
``.. code-block:: text`` block, highest layer first. Each line that starts
with units (``wire/`` for a package, ``protocol.py`` for a module,
``__init__.py`` for the root package itself) is a layer; the rest of the
line, and lines that start with anything else, are its description. A
module may import its own unit and the units of the layers drawn below its
own; units drawn on one line are independent of one another.

Run as ``python -m tests.layers`` to list every circle and every import
that breaks the order.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Optional

from tests.docs.guides import blocks

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "txamqp09"
ARCHITECTURE = ROOT / "docs" / "architecture.rst"
_UNIT = re.compile(r"^(?:\w+/|\w+\.py)$")
_ROOT_UNIT = "__init__.py"


@dataclass(frozen=True)
class Module:
    """One source file of the package.

    :ivar name: its dotted name (``txamqp09.client.api``; a package's
        ``__init__.py`` has the package's name).
    :ivar path: its file.
    :ivar is_package: whether it is a package's ``__init__.py``.
    :ivar where: its file as messages name it (``txamqp09/client/api.py``).
    """

    name: str
    path: Path
    is_package: bool
    where: str

    @property
    def package(self) -> str:
        """The package it belongs to: a package's ``__init__`` belongs to
        the package itself."""
        return self.name if self.is_package else self.name.rpartition(".")[0]

    @property
    def unit(self) -> str:
        """Its unit in the layer drawing: ``wire/``, ``protocol.py``, or
        ``__init__.py`` for the root package."""
        parts = self.name.split(".")
        if len(parts) == 1:
            return _ROOT_UNIT
        if len(parts) == 2 and not self.is_package:
            return f"{parts[1]}.py"
        return f"{parts[1]}/"


@dataclass(frozen=True)
class Import:
    """One import of a txamqp09 module by another.

    :ivar importer: the importing module.
    :ivar imported: the dotted name of the module it imports.
    :ivar line: the line of the import statement.
    """

    importer: Module
    imported: str
    line: int

    def __str__(self) -> str:
        return f"{self.importer.where}:{self.line} imports {self.imported}"


@dataclass(frozen=True)
class Circle:
    """Modules that import one another, directly or round a ring (a
    strongly connected component of the graph).

    :ivar modules: their names, sorted.
    :ivar imports: the imports that make the ring (among *modules*).
    """

    modules: tuple[str, ...]
    imports: tuple[Import, ...]

    @property
    def package(self) -> str:
        """The smallest package holding every module of the circle."""
        packages = [name.split(".") for name in self.modules]
        common = []
        for parts in zip(*packages):
            if len(set(parts)) != 1:
                break
            common.append(parts[0])
        return ".".join(common)

    def __str__(self) -> str:
        lines = [f"circle in {self.package}: " + ", ".join(self.modules)]
        lines.extend(f"    {each}" for each in self.imports)
        return "\n".join(lines)


def read_modules(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Module]:
    """Every module of *package* under *root*, by name."""
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        name = ".".join(parts)
        modules[name] = Module(name, path, is_package, str(path.relative_to(root)))
    return modules


def _absolute(module: Module, node: ast.ImportFrom) -> str:
    """The module a ``from`` import names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    base = module.package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _known(name: str, modules: Mapping[str, Module]) -> Optional[str]:
    """*name*, or the nearest package above it, if it is a module of ours."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imported_names(module: Module, node: ast.stmt, modules: Mapping[str, Module]) -> Iterator[str]:
    """The modules of ours that one import statement imports."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            found = _known(alias.name, modules)
            if found:
                yield found
    elif isinstance(node, ast.ImportFrom):
        source = _absolute(module, node)
        for alias in node.names:
            submodule = f"{source}.{alias.name}"
            found = submodule if submodule in modules else _known(source, modules)
            if found:
                yield found


def read_imports(module: Module, modules: Mapping[str, Module]) -> Iterator[Import]:
    """Every import of a module of ours by *module*, wherever it stands."""
    tree = ast.parse(module.path.read_text(encoding="utf-8"), str(module.path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for name in sorted(set(_imported_names(module, node, modules)) - {module.name}):
                yield Import(module, name, node.lineno)


def _components(nodes: Iterable[str], edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of the graph (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = lowest[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                lowest[node] = min(lowest[node], lowest[target])
            elif target in on_stack:
                lowest[node] = min(lowest[node], index[target])
        if lowest[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            found.append(component)

    for node in sorted(nodes):
        if node not in index:
            visit(node)
    return found


class ImportGraph:
    """The modules of txamqp09 and their imports of one another."""

    def __init__(self, modules: Mapping[str, Module]) -> None:
        self.modules = dict(modules)
        self.imports = [each for module in self.modules.values() for each in read_imports(module, self.modules)]

    @cached_property
    def edges(self) -> dict[str, set[str]]:
        """Each module's name to the names of the modules it imports."""
        edges: dict[str, set[str]] = defaultdict(set)
        for each in self.imports:
            edges[each.importer.name].add(each.imported)
        return edges

    @cached_property
    def circles(self) -> list[Circle]:
        """Every circle of the graph."""
        circles = []
        for component in _components(self.modules, self.edges):
            if len(component) > 1:
                members = set(component)
                ring = [
                    each for each in self.imports if each.importer.name in members and each.imported in members
                ]
                circles.append(Circle(tuple(sorted(component)), tuple(ring)))
        return circles

    @property
    def packages(self) -> list[str]:
        """Every package's name."""
        return sorted(name for name, module in self.modules.items() if module.is_package)

    def circles_in(self, package: str) -> list[Circle]:
        """The circles whose smallest enclosing package is *package*."""
        return [circle for circle in self.circles if circle.package == package]

    def layer_breaches(self, layers: list[list[str]]) -> list[str]:
        """What breaks the order of *layers* (lowest first): imports of a
        unit on the same layer or a higher one, and modules in no layer."""
        height = {unit: level for level, units in enumerate(layers) for unit in units}
        breaches = [
            f"{module.where}: its unit {module.unit} is in no layer of {ARCHITECTURE.name}"
            for module in self.modules.values()
            if module.unit not in height
        ]
        for each in self.imports:
            own, other = each.importer.unit, self.modules[each.imported].unit
            if own != other and own in height and other in height and height[other] >= height[own]:
                where = "beside" if height[other] == height[own] else "above"
                breaches.append(f"{each}: {other} stands {where} {own}")
        return breaches


def read_layers(path: Path = ARCHITECTURE) -> list[list[str]]:
    """The layers drawn in *path* (its first ``text`` code block), lowest
    first, each as its units."""
    drawing = next(block for block in blocks(path) if block.language == "text")
    layers = []
    for line in drawing.code.splitlines():
        units = []
        for word in line.split():
            if not _UNIT.match(word):
                break
            units.append(word)
        if units:
            layers.append(units)
    return layers[::-1]


def main() -> int:
    """Print every circle and every breach of the order; 1 if there is any."""
    graph = ImportGraph(read_modules())
    problems = [str(circle) for circle in graph.circles] + graph.layer_breaches(read_layers())
    print("\n".join(problems) or "no circles; every import looks down")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
