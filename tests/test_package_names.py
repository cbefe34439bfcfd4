"""One name, one thing: no two classes of executorch_espnn share a name
(two ``LoweringError`` classes, one of them imported under an alias, once
made a reader guess which one a module meant)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "executorch_espnn"


def classes_by_name(root: Path) -> dict[str, list[str]]:
    found = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                found[node.name].append(str(path.relative_to(root)))
    return found


def test_no_two_classes_share_a_name():
    shared = {name: where for name, where in classes_by_name(PACKAGE).items() if len(where) > 1}
    assert not shared, f"classes defined under the same name in several modules: {shared}"


def test_the_check_sees_a_shared_name(tmp_path):
    (tmp_path / "a.py").write_text("class LoweringError(RuntimeError):\n    pass\n")
    (tmp_path / "b.py").write_text("class LoweringError(Exception):\n    pass\n\n\nclass _Private:\n    pass\n")
    assert classes_by_name(tmp_path) == {"LoweringError": ["a.py", "b.py"]}
