"""No module of the farm or its agents imports, directly or through others, a module that imports it
back. Every import counts: at module level, inside a function, under `if TYPE_CHECKING:` (an import
never climbs a floor, wherever it is written). The sources are parsed, never imported.

An edge is an import the source names: `import a.b.c` and `from a.b import c` (c a module) go to
`a.b.c`, `from a.b import name` goes to `a.b`. Importing `a.b.c` also runs `a/__init__` and
`a/b/__init__`, but that implicit parent edge is not counted: a package whose `__init__` imports
its own submodules would otherwise always be a cycle."""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the first-party packages, each as the folder that holds it
PACKAGES = (ROOT / "farm" / "ondevice_farm", ROOT / "agents" / "ondevice_farm_agents")

#: module -> the modules it imports -> the first line that does
Graph = dict[str, dict[str, int]]


def _module_files(packages: Iterable[Path]) -> dict[str, Path]:
    """Module name -> its file; a package is named by its `__init__.py`."""
    modules: dict[str, Path] = {}
    for package in packages:
        for path in sorted(package.rglob("*.py")):
            parts = path.relative_to(package.parent).with_suffix("").parts
            if not all(part.isidentifier() for part in parts):
                continue  # not importable (a script with a dash in its name, a data folder)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _known(name: str, modules: Mapping[str, Path]) -> str | None:
    """The module `name` is, or the nearest package above it that is ours; None: not ours."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _from_base(node: ast.ImportFrom, package: str) -> str:
    """The module `from X import ...` reads from, a relative X resolved against `package`."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, *([node.module] if node.module else [])])


def _statements(tree: ast.Module) -> Iterator[ast.AST]:
    """Every statement, at any depth (in functions, classes, `if`, `try`), without walking into
    expressions: an import is always a statement, and the expressions are most of a tree."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(
            child
            for child in ast.iter_child_nodes(node)
            if isinstance(child, ast.stmt | ast.excepthandler | ast.match_case)
        )


def _imported(module: str, path: Path, modules: Mapping[str, Path]) -> dict[str, int]:
    """The modules of ours that `module` names in any import statement, each with its first line."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: dict[str, int] = {}
    for node in _statements(tree):
        if isinstance(node, ast.Import):
            targets = [_known(alias.name, modules) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(node, package)
            # `from a.b import c`: the module a.b.c where there is one, else a name of a.b
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else _known(base, modules)
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            if target is not None and target != module:
                found[target] = min(found.get(target, node.lineno), node.lineno)
    return found


def import_graph(packages: Iterable[Path]) -> tuple[Graph, dict[str, Path]]:
    modules = _module_files(packages)
    return {name: _imported(name, path, modules) for name, path in modules.items()}, modules


def strongly_connected(graph: Mapping[str, Mapping[str, int]]) -> list[list[str]]:
    """Tarjan's components of more than one module, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, {}))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return sorted(components)


def _shortest_cycle_through(
    start: str, members: set[str], graph: Mapping[str, Mapping[str, int]]
) -> list[str]:
    """The shortest closed chain from `start` back to it among `members`, as [start, ..., start]."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if start in graph[node]:
            chain = [node]
            while chain[-1] != start:
                chain.append(came_from[chain[-1]])
            return [*reversed(chain), start]
        for nxt in sorted(graph[node]):
            if nxt in members and nxt != start and nxt not in came_from:
                came_from[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"{start} is in no cycle of its component")


def shortest_cycles(component: list[str], graph: Mapping[str, Mapping[str, int]]) -> list[list[str]]:
    """The shortest cycle through each module of a component, each cycle once, from its first module
    in sorted order: [a, b, ..., a]."""
    found: list[list[str]] = []
    for start in component:
        ring = _shortest_cycle_through(start, set(component), graph)[:-1]
        first = ring.index(min(ring))
        cycle = [*ring[first:], *ring[:first], min(ring)]
        if cycle not in found:
            found.append(cycle)
    return sorted(found, key=lambda cycle: (len(cycle), cycle))


def _shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def cycles(packages: Iterable[Path]) -> list[str]:
    """Each cycle as `a -> b -> a`, with the line of each import under it: for each component of
    modules that import each other, the shortest cycle through each of its modules."""
    graph, modules = import_graph(packages)
    found = []
    for component in strongly_connected(graph):
        for cycle in shortest_cycles(component, graph):
            lines = [f"    {_shown(modules[a])}:{graph[a][b]} imports {b}" for a, b in pairwise(cycle)]
            found.append("\n".join([" -> ".join(cycle), *lines]))
    return found


def test_no_module_imports_one_that_imports_it_back() -> None:
    found = cycles(PACKAGES)
    assert not found, "import cycles (move what both need into a module below them):\n" + "\n".join(found)


def _write(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root / "pkg"


def test_a_cycle_is_found_through_functions_type_checking_and_relative_imports(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/low.py": "X = 1\n",
            "pkg/a.py": "def f():\n    from pkg.b import g\n",
            "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub import c\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/c.py": "from .. import a\nfrom ..low import X\n",
        },
    )
    assert [text.splitlines()[0] for text in cycles([package])] == ["pkg.a -> pkg.b -> pkg.sub.c -> pkg.a"]


def test_a_package_importing_its_submodules_is_no_cycle(tmp_path: Path) -> None:
    package = _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.one import ONE\nfrom . import two\n",
            "pkg/one.py": "import pkg.two\nONE = 1\n",
            "pkg/two.py": "TWO = 2\n",
        },
    )
    assert cycles([package]) == []
    # ... but a submodule that takes a name from its package's __init__ is one
    (package / "two.py").write_text("from pkg import ONE\n", encoding="utf-8")
    assert [text.splitlines()[0] for text in cycles([package])] == [
        "pkg -> pkg.two -> pkg",
        "pkg -> pkg.one -> pkg.two -> pkg",
    ]
