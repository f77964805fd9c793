"""No import cycles between the project's modules, deferred imports included.

An import inside a function hides a cycle from Python (it only runs later)
but not from the reader: the two modules still depend on each other.  The
graph below is read from the source with ``ast``, so it sees every import,
at module level and inside functions, and needs no import to work.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("aclm", "baselines", "melm", "tools")   # modules that can be imported, and so be part of a cycle
IMPORTERS = ("scripts",)                   # modules whose imports count, but that nothing imports


@dataclass(frozen=True)
class Edge:
    target: str
    where: str                             # file:line, and the function the import sits in


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules(root: Path) -> dict[str, Path]:
    """Every module of the project, by dotted name (packages by their ``__init__``)."""
    return {module_name(p, root): p for pkg in PACKAGES + IMPORTERS for p in sorted((root / pkg).rglob("*.py"))}


def resolve(name: str, importable: set[str]) -> str | None:
    """The longest prefix of ``name`` that is a project module, if any (``aclm.x.y`` -> ``aclm.x``)."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in importable:
            return candidate
    return None


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, path: Path, root: Path, importable: set[str]):
        self.module, self.path, self.root, self.importable = module, path, root, importable
        is_package = path.name == "__init__.py"
        self.package = module if is_package else module.rpartition(".")[0]
        self.scope: list[str] = []
        self.edges: list[Edge] = []

    def _add(self, name: str | None, node: ast.AST) -> None:
        target = resolve(name, self.importable) if name else None
        # a module's own packages are initialised before it runs: importing them closes no cycle
        if target is None or target == self.module or self.module.startswith(target + "."):
            return
        where = f"{self.path.relative_to(self.root)}:{node.lineno}"
        if self.scope:
            where += f" (inside {'.'.join(self.scope)})"
        self.edges.append(Edge(target, where))

    def _scoped(self, node) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:   # relative: from the importer's package, one level up per extra dot
            anchor = self.package.split(".")[: len(self.package.split(".")) - (node.level - 1)]
            base = ".".join([*anchor, *([base] if base else [])])
        for alias in node.names:
            # `from aclm import x` imports module aclm.x when there is one, else a name of aclm
            full = f"{base}.{alias.name}" if base else alias.name
            self._add(full if full in self.importable else base, node)


def import_graph(root: Path = ROOT) -> tuple[dict[str, set[str]], dict[tuple[str, str], list[str]]]:
    """Module -> the project modules it imports, and where each import is written."""
    modules = project_modules(root)
    importable = {m for m in modules if m.split(".")[0] in PACKAGES}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    where: dict[tuple[str, str], list[str]] = {}
    for module, path in modules.items():
        visitor = _Imports(module, path, root, importable)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        for edge in visitor.edges:
            graph[module].add(edge.target)
            places = where.setdefault((module, edge.target), [])
            if edge.where not in places:
                places.append(edge.where)
    return graph, where


def cyclic_components(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components that hold a cycle, each sorted (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(components)


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle ``[a, b, ..., a]`` per strongly connected component that has one."""
    return [_cycle_through(graph, c) for c in cyclic_components(graph)]


def _cycle_through(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest cycle from the component's first node back to itself (breadth-first)."""
    start, members = component[0], set(component)
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w not in members:
                    continue
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [start, *reversed(path[:-1]), start] if v != start else [start, start]
                if w not in parent:
                    parent[w] = v
                    following.append(w)
        frontier = following
    raise AssertionError(f"no cycle through {component}")


def describe(cycle: list[str], where: dict[tuple[str, str], list[str]]) -> str:
    steps = [f"{a} -> {b}  [{'; '.join(where.get((a, b), ['?']))}]" for a, b in zip(cycle, cycle[1:])]
    return " -> ".join(cycle) + "\n    " + "\n    ".join(steps)


def test_no_import_cycles():
    graph, where = import_graph()
    report = [f"{describe(_cycle_through(graph, c), where)}\n    (modules in this tangle: {', '.join(c)})"
              for c in cyclic_components(graph)]
    assert not report, "import cycles:\n" + "\n".join(report)


def test_the_graph_sees_imports_inside_functions_and_scripts():
    graph, where = import_graph()
    assert "aclm.steps.tagger" in graph["aclm.stages.ner"]                 # imported inside a function, lazily
    assert any("inside train" in w for w in where[("aclm.stages.ner", "aclm.steps.tagger")])
    assert "aclm.stages.layout" in graph["aclm.run.chain"]                  # `from aclm.stages import layout`
    assert "aclm.run.chain" in graph["scripts.run_method"]
    assert not any(m.startswith("scripts.") for targets in graph.values() for m in targets)


@pytest.mark.parametrize("graph,expected", [
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ({"a": {"b", "c"}, "b": {"c"}, "c": set()}, []),                               # a diamond is no cycle
    ({"a": {"b"}, "b": {"a"}}, [["a", "b", "a"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c", "a"]]),
    ({"x": {"x"}}, [["x", "x"]]),
    ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}}, [["a", "b", "a"], ["c", "d", "e", "c"]]),
])
def test_cycle_finder_on_hand_made_graphs(graph, expected):
    assert find_cycles(graph) == expected


def test_cycle_finder_sees_a_cycle_closed_inside_a_function(tmp_path):
    # the shape of the config <-> datasets cycle: one side imports the other inside a function
    for name, text in {"aclm/__init__.py": "",
                       "aclm/base/config.py": "def validate():\n    from aclm.base.datasets import registry\n",
                       "aclm/base/datasets.py": "from aclm.base.config import CONFIG_DIR\n",
                       "baselines/__init__.py": "", "melm/__init__.py": "", "scripts/run.py": "import aclm.base.config\n"
                       }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph, where = import_graph(tmp_path)
    assert find_cycles(graph) == [["aclm.base.config", "aclm.base.datasets", "aclm.base.config"]]
    assert "inside validate" in describe(find_cycles(graph)[0], where)


#: The layers, lowest first: a module may import its own layer and those below, never one above.  The shared
#: base; the method's steps (the models it trains among them); the other methods, built on the steps; the stage
#: cache, which knows no method; the stages; what drives a run; running experiments; the tables; the programs
#: (stage scripts and tools).
LAYERS = (("aclm", "aclm.base"), ("aclm.steps",), ("baselines", "melm"), ("aclm.engine",), ("aclm.stages",),
          ("aclm.run",), ("aclm.experiments",), ("aclm.tables",), ("scripts", "tools"))


def layer(module: str) -> int:
    found = [(len(prefix), at) for at, prefixes in enumerate(LAYERS) for prefix in prefixes
             if module == prefix or module.startswith(prefix + ".")]
    assert found, f"{module} is in no layer"
    return max(found)[1]


def test_no_module_imports_a_layer_above_its_own():
    graph, where = import_graph()
    upward = [f"{a} -> {b}  [{'; '.join(where[(a, b)])}]" for a, targets in sorted(graph.items())
              for b in sorted(targets) if layer(b) > layer(a)]
    assert upward == [], "imports of a higher layer:\n" + "\n".join(upward)


def test_the_layer_check_sees_an_upward_import(tmp_path):
    for name, text in {"aclm/__init__.py": "", "aclm/steps/__init__.py": "", "aclm/run/__init__.py": "",
                       "aclm/run/chain.py": "", "aclm/steps/keywords.py": "from aclm.run import chain\n",
                       "baselines/__init__.py": "", "melm/__init__.py": "", "tools/__init__.py": "",
                       "scripts/run.py": ""}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph, _ = import_graph(tmp_path)
    assert [(a, b) for a, ts in graph.items() for b in ts if layer(b) > layer(a)] == [("aclm.steps.keywords",
                                                                                       "aclm.run.chain")]
