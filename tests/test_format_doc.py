"""docs/xts3-format.md must describe exactly what xts3_format.h defines.

The header is the source of truth; these checks make the spec fail loudly
when the two drift apart (a new opcode, a renamed or reordered parameter
field, a moved record field, a changed limit)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from executorch_espnn import _native as fmt

DOC = Path(__file__).resolve().parents[1] / "docs" / "xts3-format.md"
TEXT = DOC.read_text(encoding="utf-8")


def op_sections() -> dict[str, str]:
    """'### NAME (opcode N)' -> the text up to the next heading."""
    parts = re.split(r"^(### \w+ \(opcode \d+\))$", TEXT, flags=re.M)
    out = {}
    for head, body in zip(parts[1::2], parts[2::2]):
        m = re.fullmatch(r"### (\w+) \(opcode (\d+)\)", head)
        out[m.group(1)] = (int(m.group(2)), body.split("\n## ")[0])
    return out


def field_rows(body: str) -> list[tuple[int, str]]:
    return [(int(k), name) for k, name in re.findall(r"^\| (\d+) \| `(\w+)` \|", body, flags=re.M)]


def test_every_opcode_has_a_section_and_no_other():
    assert set(op_sections()) == set(fmt.OPCODES)


@pytest.mark.parametrize("name", sorted(fmt.OPCODES))
def test_op_section_matches_the_header(name):
    spec = fmt.OPCODES[name]
    code, body = op_sections()[name]
    assert code == spec["opcode"]
    line = (f"Inputs: {spec['min_inputs']}..{spec['max_inputs']}, "
            f"outputs: {spec['min_outputs']}..{spec['max_outputs']}, optional inputs: ")
    assert line in body, f"{name}: expected a line starting {line!r}"
    mask = spec["optional_inputs"]
    assert (f"optional inputs: {mask:#x}" in body) if mask else ("optional inputs: none" in body)
    assert f"Since version {spec['min_version']}." in body
    # Parameter fields: every one, in order, numbered from 0, and nothing else.
    assert field_rows(body) == list(enumerate(spec["params"])), name
    if not spec["params"]:
        assert "No parameter fields" in body


def test_every_param_field_name_appears():
    for name, spec in fmt.OPCODES.items():
        for field in spec["params"]:
            assert f"`{field}`" in TEXT, f"{name}.{field}"


def table_rows(heading: str) -> list[list[str]]:
    body = TEXT.split(heading, 1)[1].split("\n## ", 1)[0]
    return [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in body.splitlines()
            if ln.startswith("|") and not ln.startswith("|---") and not ln.startswith("| offset")]


def test_header_fields():
    rows = {r[2].strip("`"): int(r[0]) for r in table_rows("## 2. Header") if r[0].isdigit()}
    assert rows == dict(fmt.HEADER_FIELDS)
    assert f"({fmt.HEADER_SIZE} bytes)" in TEXT
    assert f"`{fmt.FORMAT_MAGIC:#010x}`" in TEXT


def test_tensor_and_op_record_fields():
    tensor = {r[2].strip("`"): int(r[0]) for r in table_rows("## 4. Tensor record") if r[0].isdigit()}
    assert tensor == dict(fmt.TENSOR_FIELDS)
    assert f"## 4. Tensor record ({fmt.TENSOR_RECORD_SIZE} bytes)" in TEXT
    op = {r[2].strip("`"): int(r[0]) for r in table_rows("## 5. Op record") if r[0].isdigit()}
    assert op == dict(fmt.OP_FIELDS)
    assert f"## 5. Op record ({fmt.OP_RECORD_SIZE} bytes)" in TEXT


def test_sections_dtypes_memory_kinds():
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \| (\d+)", TEXT, flags=re.M)
    assert {name: (int(i), int(rec)) for i, name, rec in rows} == dict(fmt.SECTIONS)
    for name, (code, size) in fmt.DTYPES.items():
        assert f"{code} = `{name}` ({size} byte" in TEXT
    for name, code in fmt.MEMORY_KINDS.items():
        assert f"{code} = `{name}`" in TEXT
    assert f"{fmt.SECTION_ENTRY_SIZE} bytes each" in TEXT


def test_limits():
    rows = {r[2].strip("`"): int(r[1].split()[0]) for r in table_rows("## 9. Limits")
            if len(r) == 3 and r[1].split()[0].isdigit()}
    assert rows == dict(fmt.LIMITS)
    for const in ("CONSTANT_ALIGNMENT", "ARENA_ALIGNMENT", "BLOB_ALIGNMENT", "LUT_ENTRIES", "BILINEAR_FRAC_BITS"):
        assert f"`{const}`" in TEXT
    assert fmt.CONSTANT_ALIGNMENT == fmt.ARENA_ALIGNMENT == fmt.BLOB_ALIGNMENT == 16
    assert "`LUT_ENTRIES` is 256" in TEXT and fmt.LUT_ENTRIES == 256
    assert "`BILINEAR_FRAC_BITS` is 10" in TEXT and fmt.BILINEAR_FRAC_BITS == 10


def test_version_range():
    assert f"today {fmt.MIN_FORMAT_VERSION}..{fmt.FORMAT_VERSION}" in TEXT


@pytest.mark.parametrize("name", sorted(fmt.OPCODES))
def test_op_section_states_its_arena_aliasing(name):
    """xts3_format.h's ESPNN_XTS3_ALIASING: ops that may alias say so, others do not."""
    mode = fmt.OPCODES[name]["aliasing"]
    _, body = op_sections()[name]
    if mode == "NONE":
        assert "Arena aliasing:" not in body
    else:
        assert f"Arena aliasing: {mode} " in body
