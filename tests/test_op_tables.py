"""The hand-written lists of ops outside the format header follow it:
docs/lowering.md's op table names every opcode and only modules that exist,
its add-an-op recipe names only files that exist, and every lowering module
is imported (so a new one needs no registration line). The other lists are
generated or checked where they live: the Kconfig switches and the kernel
registry (tests/firmware/test_selective_ops.py), the format page
(test_format_doc.py), the in-place graphs (hardening/test_arena_plan.py),
the fuzz seeds (hardening/test_fuzz_seeds.py), the op corpus
(test_native_m32_asan.py)."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

from executorch_espnn import _native

REPO = Path(__file__).resolve().parents[1]
LOWERING_DOC = REPO / "docs" / "lowering.md"
PACKAGE = REPO / "python" / "executorch_espnn"


def _section(title: str) -> str:
    text = LOWERING_DOC.read_text()
    start = text.index(f"\n## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def _table_rows() -> list[list[str]]:
    rows = [line.strip("|").split(" | ") for line in _section("Where each op family lives").splitlines()
            if line.startswith("| ") and not line.startswith("| PyTorch op")]
    assert rows and all(len(r) == 3 for r in rows), "the op table's rows have 3 columns"
    return rows


def test_every_lowering_module_is_imported():
    importlib.import_module("executorch_espnn.lowering.ops")
    modules = sorted(p.stem for p in (PACKAGE / "lowering" / "ops").glob("*.py") if p.stem != "__init__")
    missing = [m for m in modules if f"executorch_espnn.lowering.ops.{m}" not in sys.modules]
    assert missing == [], f"not imported by lowering/ops/__init__.py: {missing}"


def test_the_op_table_names_every_opcode():
    """Every opcode a lowering writes has a row; a region header (no inputs
    of its own: BAND_LOOP) is written by the planner, not by a lowering."""
    named = {w for row in _table_rows() for w in re.findall(r"\b[A-Z][A-Z0-9_]+\b", row[1])}
    lowered = {n for n, d in _native.OPCODES.items() if d["max_inputs"] > 0}
    assert sorted(lowered - named) == [], "docs/lowering.md, 'Where each op family lives': no row for these opcodes"


def test_the_op_table_names_modules_that_exist():
    modules = [m for row in _table_rows() for m in re.findall(r"`ops/(\w+\.py)`", row[2])]
    assert modules and [m for m in modules if not (PACKAGE / "lowering" / "ops" / m).is_file()] == []


def test_the_recipe_names_files_that_exist():
    """Paths in the add-an-op recipe, relative to the repository, the
    package or the runtime's sources (templates such as <family> aside)."""
    recipe = _section("Adding an XTS3 op")
    paths = {p for p in re.findall(r"`([\w./-]+)`", recipe) if "/" in p or p.endswith((".py", ".h", ".cpp"))}
    roots = (REPO, PACKAGE, REPO / "components" / "espnn_runtime" / "src")
    assert len(paths) > 20
    assert sorted(p for p in paths if not any((r / p).exists() for r in roots)) == []
