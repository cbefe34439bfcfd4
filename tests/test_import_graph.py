"""How the package's modules import each other, read from the source (AST):
no cycle between its parts, every import inside a function says why it is
there, and nothing outside tests/ imports from tests/.

An import inside a function hides a dependency from the reader and from
this graph's order; it is kept only with a reason, written on the import's
line or the line above as ``# lazy: <why>`` (docs/lowering.md, "Imports").
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "python" / "executorch_espnn"
LAZY_TAG = "# lazy:"

# Pairs of the package's parts that still import each other. Each entry needs
# a reason; the memory <-> analysis cycle is gone (executorch_espnn/macs.py).
KNOWN_CYCLES = {
    # pte_suite.method_input_specs belongs in runtime (the lower layer); it
    # moves with the container helpers shared by bundle.py and pte_suite.py.
    frozenset({"runtime", "pte_suite"}),
}


def _sources(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _module_name(path: Path) -> list[str]:
    parts = ["executorch_espnn", *path.relative_to(PACKAGE).with_suffix("").parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imported(path: Path, node: ast.AST) -> list[str]:
    """Absolute names of the executorch_espnn modules (or package members) an import statement names."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "executorch_espnn"]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level == 0:
        base = node.module or ""
        if base.split(".")[0] != "executorch_espnn":
            return []
    else:
        here = _module_name(path)
        package = here if path.name == "__init__.py" else here[:-1]
        base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
    return [f"{base}.{a.name}" for a in node.names]


def _part(name: str) -> str:
    """The part of the package a module belongs to: its subpackage, or the
    root module itself (``executorch_espnn.runtime`` -> "runtime")."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def import_graph() -> dict[str, set[str]]:
    """part -> the parts it imports, from every import statement (module
    level and inside functions alike)."""
    graph: dict[str, set[str]] = {}
    for path in _sources(PACKAGE):
        src = _part(".".join(_module_name(path)))
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for name in _imported(path, node):
                dst = _part(name)
                if dst != src and ((PACKAGE / dst).is_dir() or (PACKAGE / f"{dst}.py").exists()):
                    graph.setdefault(src, set()).add(dst)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components with more than one part (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_package_parts_form_no_cycle():
    found = [frozenset(c) for c in cycles(import_graph())]
    assert not [c for c in found if c not in KNOWN_CYCLES], f"parts of executorch_espnn that import each other: {found}"
    gone = KNOWN_CYCLES - set(found)
    assert not gone, f"no longer a cycle: remove {gone} from KNOWN_CYCLES"


def test_memory_does_not_import_analysis():
    graph = import_graph()
    assert "memory" in graph.get("analysis", set())  # analysis builds on the arena rule
    assert "analysis" not in graph.get("memory", set())


def test_cycle_detection_sees_a_cycle_through_a_third_part():
    assert cycles({"memory": {"macs"}, "macs": {"analysis"}, "analysis": {"memory"}}) == [
        {"memory", "macs", "analysis"}]
    assert cycles({"analysis": {"memory", "macs"}, "memory": {"macs"}}) == []


def function_level_imports(path: Path) -> list[tuple[int, str]]:
    """(line, source line) of each import inside a function without a
    reason: ``# lazy: <why>`` on its own line, or as a comment line above the
    group of imports it belongs to (imports and blank lines between them)."""
    text = path.read_text()
    lines = text.splitlines()
    nodes = [node for fn in ast.walk(ast.parse(text, str(path)))
             if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
             for node in ast.walk(fn) if isinstance(node, (ast.Import, ast.ImportFrom))]
    import_lines = {n for node in nodes for n in range(node.lineno, node.end_lineno + 1)}
    bare = []
    for node in nodes:
        if LAZY_TAG in lines[node.lineno - 1]:
            continue
        above = node.lineno - 1
        while above >= 1 and (above in import_lines or not lines[above - 1].strip()):
            above -= 1
        if not (above >= 1 and lines[above - 1].strip().startswith(LAZY_TAG)):
            bare.append((node.lineno, lines[node.lineno - 1].strip()))
    return sorted(set(bare))


def test_every_function_level_import_says_why():
    bare = [f"{p.relative_to(REPO)}:{line}: {src}" for p in _sources(PACKAGE)
            for line, src in function_level_imports(p)]
    assert not bare, (f"imports inside functions without a '{LAZY_TAG} <why>' comment (move them to the top "
                      "of the module, or say why they cannot be there):\n" + "\n".join(bare))


def test_the_lazy_import_check_finds_a_bare_one(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import os\n\n\ndef f():\n"
                   "    import json\n"  # 5: bare
                   "    # lazy: torch is heavy\n"
                   "    import torch\n"
                   "\n"
                   "    from x import y\n"  # 9: in the group under the comment
                   "    from z import w  # lazy: optional\n"
                   "    v = 1\n"
                   "    from q import r\n"  # 12: code between it and the comment
                   "    return json, torch, y, w, v, r, os\n")
    assert function_level_imports(src) == [(5, "import json"), (12, "from q import r")]


def _imports_tests(path: Path, root: Path = REPO) -> list[str]:
    text = path.read_text()
    where = path.relative_to(root)
    found = []
    for node in ast.walk(ast.parse(text, str(path))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        found += [f"{where}:{node.lineno}: import {n}" for n in names
                  if n == "tests" or n.startswith("tests.")]
        # sys.path.insert(0, str(REPO / "tests" ...)): the tests' modules imported by their bare names
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("insert", "append", "extend", "__setitem__") and "sys.path" in ast.unparse(node):
            if '"tests"' in ast.unparse(node) or "'tests'" in ast.unparse(node) or "tests/" in ast.unparse(node):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.Assign) and "sys.path" in ast.unparse(node.targets[0]) and "tests" in ast.unparse(node):
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def _outside_tests() -> list[Path]:
    skip = {"tests", "build", ".git", "node_modules"}
    return [p for p in _sources(REPO) if not skip & set(p.relative_to(REPO).parts)
            and not any(part.startswith("build") for part in p.relative_to(REPO).parts)]


def test_nothing_outside_tests_imports_from_tests():
    found = [hit for p in _outside_tests() for hit in _imports_tests(p)]
    assert not found, "code outside tests/ importing the tests' modules:\n" + "\n".join(found)


@pytest.mark.parametrize("source, hits", [
    ("import tests.support.op_corpus\n", 1),
    ("from tests.support import op_corpus\n", 1),
    ("import sys\nsys.path.insert(0, str(REPO / 'tests'))\n", 1),
    ("import sys\nsys.path[:0] = [str(REPO / 'tests'), 'x']\n", 1),
    ("import sys\nsys.path.insert(0, str(REPO / 'benchmarks'))\nimport executorch_espnn.testing\n", 0),
])
def test_the_outside_import_check_finds_them(tmp_path, source, hits):
    path = tmp_path / "tool.py"
    path.write_text(source)
    assert len(_imports_tests(path, tmp_path)) == hits


def test_the_serializer_is_a_leaf():
    """serialization writes the plan it is given: it reads the format from
    the native runtime and imports no planner (executorch_espnn.xts3_writer
    plans, then serializes)."""
    graph = import_graph()
    assert graph.get("serialization", set()) <= {"_native"}
    assert {"memory", "serialization"} <= graph["xts3_writer"]
