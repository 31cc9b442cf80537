"""No module of the package imports another in a cycle.

A cycle works only while every import of it sits where it runs late enough
(inside a function, after the names the other side needs), so it breaks
when code moves; the package keeps none. The graph is built from the
sources with ``ast``: every ``import`` and ``from ... import`` anywhere in a
module, including inside functions and ``if TYPE_CHECKING:`` blocks.
Importing a submodule also runs its parent packages' ``__init__``; that
implicit edge is not counted, as it would make every package a cycle with
its own submodules.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Optional, Set

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "aclalloc"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, is_package: bool, level: int, target: Optional[str]) -> str:
    """The absolute name of ``from <level dots><target>`` written in ``module``."""
    if level == 0:
        return target or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def import_graph(root: Path = PACKAGE) -> Dict[str, Set[str]]:
    """module -> the modules of the package it imports."""
    paths = {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: Dict[str, Set[str]] = {}
    for module, path in paths.items():
        is_package = path.name == "__init__.py"
        edges: Set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(module, is_package, node.level, node.module)
                # `from pkg import name`: the submodule pkg.name when there
                # is one, else an attribute of pkg itself.
                names = [
                    f"{source}.{alias.name}" if f"{source}.{alias.name}" in paths else source
                    for alias in node.names
                ]
            else:
                continue
            edges |= {name for name in names if name in paths and name != module}
        graph[module] = edges
    return graph


def find_cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or None."""
    done: Set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path: List[str] = []
        on_path: Set[str] = set()
        stack = [(start, iter(sorted(graph[start])))]
        path.append(start)
        on_path.add(start)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
            elif child in on_path:
                return [*path[path.index(child) :], child]
            elif child not in done:
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
                on_path.add(child)
    return None


def test_the_graph_sees_every_kind_of_import() -> None:
    """Guards the graph itself: module-level, relative and package imports."""
    graph = import_graph()
    assert "aclalloc.npu._mempool" in graph["aclalloc.npu.memory"]
    assert "aclalloc._lib" in graph["aclalloc.npu.memory"]
    assert "aclalloc.npu.memory" in graph["aclalloc.npu"]
    assert "aclalloc.acl.rt" in graph["aclalloc.acl"]
    assert "aclalloc._callbacks" in graph["aclalloc.acl.rt"]


def test_the_graph_sees_imports_inside_functions(tmp_path: Path) -> None:
    """Guards the graph and the search on a made-up package whose circle
    hides in a function, as such circles do."""
    package = tmp_path / "aclalloc"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from . import a\n")
    (package / "sub" / "a.py").write_text("from .b import f\n")
    (package / "sub" / "b.py").write_text("def f():\n    from .. import sub\n    return sub\n")
    graph = import_graph(package)
    assert graph["aclalloc.sub.b"] == {"aclalloc.sub"}
    assert find_cycle(graph) == ["aclalloc.sub", "aclalloc.sub.a", "aclalloc.sub.b", "aclalloc.sub"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_module_imports_another_in_a_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])
