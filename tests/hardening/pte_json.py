"""Field-level edits of a .pte for the corrupted-program tests: the program
flatbuffer as JSON and back, through the `flatc` and the schema
(schema/program.fbs) that ship in the executorch wheel.

``inline_program(pte)`` is the JSON of a program with every delegate payload
moved from its segment into ``backend_delegate_data`` (INLINE), so that the
rebuilt file stands alone (no extended header, no segments) and still loads
and runs; a test then deletes or changes one field and rebuilds it with
``to_pte``.
"""

from __future__ import annotations

import json
import struct
import subprocess
import tempfile
from pathlib import Path

EXT_HEADER = b"eh00"  # ExecuTorch's extended header, at byte 8


def _wheel() -> tuple[Path, Path]:
    import executorch

    root = Path(list(executorch.__path__)[0])
    return root / "data" / "bin" / "flatc", root / "schema" / "program.fbs"


def _layout(pte: bytes) -> tuple[int, int]:
    """(flatbuffer size, segment base offset) of a .pte."""
    if pte[8:12] == EXT_HEADER:
        _, program_size, segment_base = struct.unpack_from("<IQQ", pte, 12)
        return program_size, segment_base
    return len(pte), 0


def to_json(pte: bytes) -> dict:
    flatc, schema = _wheel()
    size, _ = _layout(pte)
    with tempfile.TemporaryDirectory() as d:
        Path(d, "p.bin").write_bytes(pte[:size])
        subprocess.run([str(flatc), "--json", "--raw-binary", "--strict-json", "--defaults-json", "-o", d,
                        str(schema), "--", str(Path(d, "p.bin"))], check=True, capture_output=True)
        return json.loads(Path(d, "p.json").read_text())


def to_pte(doc: dict) -> bytes:
    flatc, schema = _wheel()
    with tempfile.TemporaryDirectory() as d:
        Path(d, "p.json").write_text(json.dumps(doc))
        subprocess.run([str(flatc), "--binary", "-o", d, str(schema), str(Path(d, "p.json"))], check=True,
                       capture_output=True)
        return Path(d, "p.pte").read_bytes()  # the schema's file_extension


def inline_program(pte: bytes) -> dict:
    """The program's JSON with segment-held delegate payloads made INLINE."""
    doc = to_json(pte)
    _, base = _layout(pte)
    inline = doc.setdefault("backend_delegate_data", [])
    for plan in doc["execution_plan"]:
        for d in plan.get("delegates", []):
            ref = d["processed"]
            if ref["location"] == "SEGMENT":
                seg = doc["segments"][ref["index"]]
                start = base + seg["offset"]
                inline.append({"data": list(pte[start:start + seg["size"]])})
                d["processed"] = {"location": "INLINE", "index": len(inline) - 1}
    assert not (doc.get("constant_segment") or {}).get("offsets", [0])[1:], "constants in a segment: not handled"
    doc["segments"] = []
    return doc
