"""The lists of ops outside the format header follow it: docs/lowering.md's
op table is what scripts/gen_lowering_table.py writes from the rows the
lowering modules declare (OP_TABLE_ROWS), those rows name every opcode and
every module that registers an op, the add-an-op recipe names only files
that exist, and every lowering module is imported (so a new one needs no
registration line). The other lists are generated or checked where they
live: the Kconfig switches and the kernel
registry (tests/firmware/test_selective_ops.py), the format page
(test_format_doc.py), the in-place graphs (hardening/test_arena_plan.py),
the fuzz seeds (hardening/test_fuzz_seeds.py), the opcodes the -m32 and
sanitizer builds run (test_native_m32_asan.py: op corpus and single-op
seeds)."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest
from support.scripts import load_script

from executorch_espnn import _native

REPO = Path(__file__).resolve().parents[1]
LOWERING_DOC = REPO / "docs" / "lowering.md"
PACKAGE = REPO / "python" / "executorch_espnn"
TABLE_GENERATOR = REPO / "scripts" / "gen_lowering_table.py"


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


def _table_generator():
    return load_script(TABLE_GENERATOR)


def test_the_op_table_is_what_the_generator_writes():
    """A new op family needs no hand edit of the page: its module declares
    its rows, scripts/gen_lowering_table.py writes the table, and this fails
    until it was rerun."""
    gen = _table_generator()
    text = LOWERING_DOC.read_text()
    assert gen.generated(text, gen.declared_rows()) == text, (
        "docs/lowering.md, 'Where each op family lives': the table is not what the lowering modules' "
        "OP_TABLE_ROWS give; run PYTHONPATH=BUILD_DIR/pkg python scripts/gen_lowering_table.py")


def test_the_declared_rows_name_every_opcode():
    """Every opcode a lowering writes is named by a row some lowering module
    declares; a region header (no inputs of its own: BAND_LOOP) is written
    by the planner, not by a lowering."""
    named = {w for _, row in _table_generator().declared_rows() for w in re.findall(r"\b[A-Z][A-Z0-9_]+\b", row.xts3)}
    lowered = {n for n, d in _native.OPCODES.items() if d["max_inputs"] > 0}
    assert sorted(lowered - named) == [], "no lowering module's OP_TABLE_ROWS names these opcodes"


def test_the_declared_rows_name_every_module_that_registers_an_op():
    from executorch_espnn.lowering import registry

    registry._ensure_loaded()
    registering = {e.analyze.__module__.rsplit(".", 1)[1] for es in registry._REGISTRY.values() for e in es}
    named = {m for module, row in _table_generator().declared_rows() for m in (module, *row.also_in)}
    assert sorted(registering - named) == [], "these lowering modules register ops but no OP_TABLE_ROWS names them"


def test_the_op_table_names_every_opcode():
    """The page itself, as a reader sees it (the generator's output)."""
    named = {w for row in _table_rows() for w in re.findall(r"\b[A-Z][A-Z0-9_]+\b", row[1])}
    lowered = {n for n, d in _native.OPCODES.items() if d["max_inputs"] > 0}
    assert sorted(lowered - named) == [], "docs/lowering.md, 'Where each op family lives': no row for these opcodes"


def test_the_op_table_names_modules_that_exist():
    modules = [m for row in _table_rows() for m in re.findall(r"`ops/(\w+\.py)`", row[2])]
    assert modules and [m for m in modules if not (PACKAGE / "lowering" / "ops" / m).is_file()] == []


def test_the_table_generator_follows_a_new_row(tmp_path, capsys, monkeypatch):
    """A module declaring one more row: --check reports the page out of
    date, a run writes the row at its position and --check passes; two rows
    at one position, a cell with '|' and a page without its markers are
    refused."""
    from executorch_espnn.lowering.op_table import OpTableRow

    gen = _table_generator()
    rows = gen.declared_rows()
    new = ("norm", OpTableRow(165, "new_op (the last dim)", "NEW_OP"))
    monkeypatch.setattr(gen, "declared_rows", lambda: [*rows, new])
    doc = tmp_path / "lowering.md"
    doc.write_text(LOWERING_DOC.read_text())
    assert gen.main(["--check", "--doc", str(doc)]) == 1
    assert "run scripts/gen_lowering_table.py" in capsys.readouterr().err
    assert gen.main(["--doc", str(doc)]) == 0 and gen.main(["--check", "--doc", str(doc)]) == 0
    lines = doc.read_text().splitlines()
    row = lines.index("| new_op (the last dim) | NEW_OP | `ops/norm.py` |")
    assert lines[row - 1].endswith("| LAYER_NORM | `ops/norm.py` |") and lines[row + 1].startswith("| upsample")
    assert doc.read_text().replace(lines[row] + "\n", "") == LOWERING_DOC.read_text()
    with pytest.raises(ValueError, match="two op table rows at position"):
        gen.table([*rows, ("norm", OpTableRow(160, "x", "NEW_OP"))])
    with pytest.raises(ValueError, match="without '|'"):
        gen.table([*rows, ("norm", OpTableRow(165, "a | b", "NEW_OP"))])
    doc.write_text(LOWERING_DOC.read_text().replace(gen.END, ""))
    with pytest.raises(ValueError, match="marker lines"):
        gen.main(["--doc", str(doc)])


def test_the_recipe_names_files_that_exist():
    """Paths in the add-an-op recipe, relative to the repository, the
    package or the runtime's sources (templates such as <family> aside)."""
    recipe = _section("Adding an XTS3 op")
    paths = {p for p in re.findall(r"`([\w./-]+)`", recipe) if "/" in p or p.endswith((".py", ".h", ".cpp"))}
    roots = (REPO, PACKAGE, REPO / "components" / "espnn_runtime" / "src")
    assert len(paths) > 20
    assert sorted(p for p in paths if not any((r / p).exists() for r in roots)) == []
