"""What the board runner's two modes share is written once
(components/espnn_test_runner: container_header.cpp for the XTSB/XTSP
header rules, result_line.cpp for the result lines), so the two modes
cannot drift apart again: the same header fault gets the same verdict from
the bundle parser and the suite parser, and no runner source but
result_line.cpp spells a record's prefix."""

from __future__ import annotations

import re
import struct
import subprocess
import zlib

from executorch_espnn import bundle as B
from executorch_espnn import pte_suite as S

from . import bundle_mutations as bm
from .conftest import REPO
from .test_container_bytes import small_bundle, small_suite

# (header field, struct format, value) faults both formats' headers can have.
SHARED_FAULTS = [("flags", "<I", 1), ("reserved", "<I", 7), ("version", "<H", 2), ("header_size", "<H", 40),
                 ("case_count", "<I", 0), ("case_count", "<I", 1025), ("case_table", "<I", 16),
                 ("case_table", "<I", 0xFFFFFFF0)]


def _faulty(data: bytes, fields: dict, header_size: int) -> dict[str, bytes]:
    """name -> a container with that fault (CRC recomputed, so each fault
    reaches the check it targets), plus truncation, a corrupt byte and a
    foreign magic."""
    out = {}
    for field, fmt, value in SHARED_FAULTS:
        b = bytearray(data)
        struct.pack_into(fmt, b, fields[field], value)
        struct.pack_into("<I", b, fields["crc32"], zlib.crc32(bytes(b[header_size:])))
        out[f"{field}={value}"] = bytes(b)
    out["truncated"] = data[:len(data) // 2]
    out["short"] = data[:header_size - 1]
    out["corrupt"] = data[:-1] + bytes([data[-1] ^ 1])
    out["magic"] = b"XTSQ" + data[4:]
    return out


def _shape(msg: str) -> str:
    """A message with the container's name and every number taken out."""
    msg = re.sub(r"\bXTS[BPQ]\b", "XTS?", msg).replace("bundle", "C").replace("suite", "C")
    return re.sub(r"0x[0-9a-f]+|\d+", "#", msg)


def test_a_header_fault_gets_the_same_verdict_in_both_containers(host_runner, tmp_path):
    bundles = _faulty(small_bundle(), B.HEADER_FIELDS, B.HEADER_SIZE)
    suites = _faulty(small_suite(), S.HEADER_FIELDS, S.HEADER_SIZE)
    paths = []
    for name, data in bundles.items():
        paths.append(tmp_path / f"{name}.xtsb")
        paths[-1].write_bytes(data)
    r = subprocess.run([str(host_runner), *map(str, paths)], capture_output=True, text=True, timeout=300)
    assert "AddressSanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr[-3000:]
    got = bm.parse_multi(r.stdout)
    bundle_msgs = {}
    for name, p in zip(bundles, paths):
        lines = got[str(p)]
        assert lines[0].startswith("ESPNN_BUNDLE_ERROR v=1 msg="), (name, lines)
        assert lines[1] == "ESPNN_END v=1 cases=0 passed=0 failed=1", (name, lines)
        bundle_msgs[name] = lines[0].split(" msg=", 1)[1]
    suite_msgs = {}
    for name, data in suites.items():
        p = tmp_path / f"{name}.xtsp"
        p.write_bytes(data)
        r = subprocess.run([str(host_runner), "--inspect-suite", str(p)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and r.stdout.startswith("SUITE_ERROR msg="), (name, r.stdout, r.stderr[-2000:])
        suite_msgs[name] = r.stdout.split("msg=", 1)[1].rstrip("\n")
    assert {n: _shape(m) for n, m in suite_msgs.items()} == {n: _shape(m) for n, m in bundle_msgs.items()}
    assert suite_msgs["flags=1"] == "suite header: flags 0x1 are not defined"
    assert suite_msgs["magic"] == "suite header: bad magic 0x51535458 (expected 'XTSP')"
    size = len(small_suite())
    assert suite_msgs["truncated"] == (f"suite header: suite_size {size} exceeds the {size // 2} bytes given "
                                       "(truncated suite, or the partition is too small)")


def _runner_sources() -> dict[str, str]:
    src = REPO / "components/espnn_test_runner/src"
    out = {p.name: p.read_text() for p in sorted(src.glob("*.cpp"))}
    out["main.cpp"] = (REPO / "main/main.cpp").read_text()
    return out


def test_record_prefixes_are_spelled_only_by_the_result_line_rule():
    """Every ESPNN_ record of either mode (and main/'s rejection of a test
    file it cannot map) is built by result_line.cpp; the modes add fields."""
    spelled = {name for name, text in _runner_sources().items() if re.search(r'"ESPNN_', text)}
    assert spelled == {"result_line.cpp"}


def test_result_lines_are_not_built_with_printf():
    """Result lines come out the same on every libc: the line rule and the
    bundle core call no printf-family function; the .pte core uses one only
    to compose the msg= text of an error (as Status does in bundle mode)."""
    sources = _runner_sources()
    for name in ("result_line.cpp", "bundle_runner.cpp"):
        assert not re.search(r"\bv?s?n?printf\s*\(", sources[name]), name
    targets = re.findall(r"\bv?s?n?printf\s*\(\s*(\w+)", sources["pte_runner.cpp"])
    assert targets and set(targets) == {"msg", "setup_msg"}, targets
