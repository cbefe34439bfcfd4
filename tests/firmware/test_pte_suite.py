"""The XTSP .pte suite format (executorch_espnn.pte_suite) and its host
runner, which runs a suite with main/'s own .pte mode core (bound in
_et_backend) over the executorch wheel's runtime: verify every output, then
time, one ESPNN_RESULT line per case."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest

pytest.importorskip("executorch")

from executorch_espnn import pte_suite as S  # noqa: E402
from executorch_espnn.bundle import parse_results  # noqa: E402


@pytest.fixture(scope="module")
def suite(pte) -> S.PteSuite:
    return S.make_suite(pte, cases=2, runs=2)


def _run(data: bytes) -> tuple[list[dict], list[str]]:
    lines: list[str] = []
    recs = S.run_suite(data, write=lines.append)
    return recs, lines


# ------------------------------------------------------------------ format
def test_writer_layout_and_round_trip(suite):
    data = S.write_suite(suite)
    (magic, version, hsize, size, flags, pte_off, pte_size, m_off, m_size, count, table, crc,
     reserved) = struct.unpack_from("<IHHIIIIIIIIII", data)
    assert data[:4] == b"XTSP" and (version, hsize, size, flags, reserved) == (1, 48, len(data), 0, 0)
    assert pte_off % 128 == 0 and data[pte_off:pte_off + pte_size] == suite.pte
    assert data[m_off:m_off + m_size] == b"forward" and count == 2 and table == 48
    assert crc == zlib.crc32(data[48:]) and len(data) % 16 == 0
    for i in range(count):
        rec = struct.unpack_from("<8I", data, table + 32 * i)
        for t in range(rec[3]):
            dtype, rank, d_off, d_size = struct.unpack_from("<4I", data, rec[2] + 64 * t)
            assert (dtype, rank) == (6, 4) and d_off % 16 == 0 and d_size == 3 * 8 * 8 * 4
    back = S.read_suite(data)
    assert back.pte == suite.pte and back.method == "forward"
    for a, b in zip(suite.cases, back.cases):
        assert a.name == b.name and a.runs == b.runs == 2
        for x, y in zip(a.inputs + a.expected, b.inputs + b.expected):
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def test_expected_outputs_come_from_the_host_runtime(pte, suite):
    from executorch_espnn.runtime import run_pte

    c = suite.cases[0]
    (want,) = run_pte(pte, c.inputs)
    assert c.expected[0].tobytes() == want.numpy().tobytes()
    assert suite.cases[0].inputs[0].tobytes() != suite.cases[1].inputs[0].tobytes()  # seeds differ


def test_dtypes_shapes_and_tolerances_survive(pte):
    ins = [np.arange(6, dtype=np.int8).reshape(2, 3), np.array(True), np.zeros((0, 4), np.int32)]
    outs = [np.linspace(0, 1, 5, dtype=np.float32), np.arange(4, dtype=np.int64).reshape(1, 1, 2, 2)]
    case = S.PteCase("mixed", ins, outs, runs=7, atol=[0.25, 3.0])
    back = S.read_suite(S.write_suite(S.PteSuite(pte, "forward", [case]))).cases[0]
    for x, y in zip(ins + outs, back.inputs + back.expected):
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)
    assert back.atols() == [0.25, 0.0]  # integer outputs are always bit-exact
    assert back.runs == 7


@pytest.mark.parametrize("mutate, message", [
    (lambda s: setattr(s.cases[1], "name", s.cases[0].name), "unique"),
    (lambda s: setattr(s.cases[0], "name", "bad name"), "case name"),
    (lambda s: setattr(s, "method", "for ward"), "method name"),
    (lambda s: setattr(s.cases[0], "runs", S.MAX_RUNS + 1), "runs"),
    (lambda s: setattr(s.cases[0], "expected", []), "outputs"),
    (lambda s: setattr(s.cases[0], "atol", -1.0), "tolerance"),
    (lambda s: setattr(s.cases[0], "atol", [0.1, 0.2]), "tolerances"),
    (lambda s: setattr(s.cases[0], "inputs", [np.zeros(2, np.complex64)]), "dtype"),
    (lambda s: setattr(s, "cases", []), "1..1024"),
])
def test_writer_rejects_bad_suites(suite, mutate, message):
    import copy

    s = copy.deepcopy(suite)
    mutate(s)
    with pytest.raises(ValueError, match=message):
        S.write_suite(s)


def _recrc(data: bytearray) -> bytes:
    struct.pack_into("<I", data, 40, zlib.crc32(bytes(data[48:])))
    return bytes(data)


def test_reader_rejects_corruption(suite):
    data = S.write_suite(suite)
    with pytest.raises(ValueError, match="CRC"):
        S.read_suite(data[:-16])
    flipped = bytearray(data)
    flipped[-1] ^= 1
    with pytest.raises(ValueError, match="CRC"):
        S.read_suite(bytes(flipped))
    with pytest.raises(ValueError, match="XTSP"):
        S.read_suite(b"XTSB" + data[4:])
    bad_dims = bytearray(data)
    first_tensor = struct.unpack_from("<I", data, 48 + 8)[0]
    struct.pack_into("<I", bad_dims, first_tensor + 32, 9)  # dims[0] 1 -> 9: size no longer matches
    with pytest.raises(ValueError, match="input 0: .* do not match shape"):
        S.read_suite(_recrc(bad_dims))


# ------------------------------------------------------------------ host runner
def test_host_runner_passes_and_prints_one_line_per_case(suite):
    recs, lines = _run(S.write_suite(suite))
    assert lines[0].startswith("ESPNN_BEGIN v=1 mode=pte ") and lines[-1].startswith("ESPNN_END v=1 mode=pte ")
    results = [r for r in recs if r["kind"] == "RESULT"]
    assert [r["case"] for r in results] == ["case0", "case1"]
    for r in results:
        assert r["status"] == "pass" and r["runs"] == 2 and r["tolerance"] == "exact"
        assert r["us_min"] <= r["us_mean"] <= r["us_max"] and r["cycles_mean"] is None
    assert recs[-1] == {"kind": "END", "v": 1, "mode": "pte", "cases": 2, "passed": 2, "failed": 0}
    assert parse_results("\n".join(lines)) == recs


def test_host_runner_reports_the_first_differing_element(suite):
    import copy

    s = copy.deepcopy(suite)
    exp = s.cases[1].expected[0].reshape(-1)
    exp[5] = np.nextafter(exp[5], np.float32(np.inf))  # one ULP off
    recs, lines = _run(S.write_suite(s))
    r = [r for r in recs if r["kind"] == "RESULT"]
    assert r[0]["status"] == "pass"
    assert r[1]["status"] == "mismatch" and r[1]["stage"] == "verify"
    assert (r[1]["output"], r[1]["element"], r[1]["diff_elements"], r[1]["of"]) == (0, 5, 1, 4 * 8 * 8)
    assert r[1]["expected"] == "0x" + struct.pack(">f", exp[5]).hex()
    assert "us_mean" not in r[1]  # nothing is timed after a failed verification
    assert recs[-1]["failed"] == 1


def test_tolerance_accepts_a_float_output_within_atol(suite):
    import copy

    s = copy.deepcopy(suite)
    s.cases[0].expected[0] = s.cases[0].expected[0] + np.float32(1e-3)
    s.cases[0].atol = 2e-3
    s.cases[1].expected[0] = s.cases[1].expected[0] + np.float32(1e-2)
    s.cases[1].atol = 2e-3
    recs, _ = _run(S.write_suite(s))
    r = [r for r in recs if r["kind"] == "RESULT"]
    assert (r[0]["status"], r[0]["tolerance"]) == ("pass", "atol")
    assert r[1]["status"] == "mismatch"


def test_host_runner_errors_are_result_lines(suite):
    import copy

    s = copy.deepcopy(suite)
    s.method = "missing"
    recs, _ = _run(S.write_suite(s))
    assert {r["stage"] for r in recs if r["kind"] == "RESULT"} == {"method"}
    s = copy.deepcopy(suite)
    s.cases[0].inputs = [np.zeros((1, 3, 4, 4), np.float32)]
    recs, _ = _run(S.write_suite(s))
    r = [r for r in recs if r["kind"] == "RESULT"]
    assert r[0]["status"] == "error" and r[0]["stage"] == "inputs" and r[1]["status"] == "pass"
    assert r[0]["msg"] == "input 0: shape differs from the method's"
    s = copy.deepcopy(suite)
    s.pte = b"\0" * 64
    recs, _ = _run(S.write_suite(s))
    assert {r["stage"] for r in recs if r["kind"] == "RESULT"} == {"load"}
    recs, lines = _run(b"XTSP" + b"\0" * 60)
    assert recs[0]["kind"] == "SUITE_ERROR" and "msg" in recs[0] and recs[-1]["failed"] == 1


def test_a_rejected_suite_is_one_failure_in_the_summary_too(pte):
    """RunSuite's summary agrees with the END line it prints for a suite that
    does not parse (main/'s exit status on the linux target follows it), as
    RunBundle's does for a bundle: one failure, no case."""
    from executorch_espnn import _et_backend

    lines: list[str] = []
    summary = _et_backend.run_suite(b"XTSP" + b"\0" * 60, 1, lines.append, "host", 1 << 16, 1 << 16)
    assert lines[-1] == "ESPNN_END v=1 mode=pte cases=0 passed=0 failed=1"
    assert summary == {"suite_ok": False, "cases": 0, "passed": 0, "failed": 1}


def test_cli_pack_inspect_run(pte, tmp_path, capsys):
    (tmp_path / "m.pte").write_bytes(pte)
    out = tmp_path / "s.xtsp"
    assert S.main(["pack", str(tmp_path / "m.pte"), "-o", str(out), "--cases", "2", "--runs", "1"]) == 0
    assert S.main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "m_0: inputs [float32[1, 3, 8, 8]] -> outputs [float32[1, 4, 8, 8]], runs 1" in text
    assert S.main(["run", str(out)]) == 0
    assert "ESPNN_END v=1 mode=pte cases=2 passed=2 failed=0" in capsys.readouterr().out


def test_extract_feeds_executorchs_selective_build(pte, suite, tmp_path):
    """scripts/build-executorch-esp.sh extracts the suite's .pte and hands it
    to ExecuTorch's selective build (EXECUTORCH_SELECT_OPS_MODEL), which
    reads the program's operator list with codegen/tools/gen_oplist.py - the
    same tool the wheel ships. Only the CPU operators are selected: the
    delegated conv/relu need no portable kernel."""
    import subprocess
    import sys

    import yaml

    s = tmp_path / "s.xtsp"
    s.write_bytes(S.write_suite(suite))
    assert S.main(["extract", str(s), "-o", str(tmp_path / "m.pte")]) == 0
    assert (tmp_path / "m.pte").read_bytes() == pte
    out = tmp_path / "selected.yaml"
    r = subprocess.run([sys.executable, "-m", "executorch.codegen.tools.gen_oplist",
                        f"--model_file_path={tmp_path / 'm.pte'}", f"--output_path={out}"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert set(yaml.safe_load(out.read_text())["operators"]) == {"aten::sin.out"}


def test_build_script_drives_executorchs_preset_and_selective_build():
    """The cross-build script cannot run here (no ESP-IDF); check that it is
    the one flow the docs describe: ExecuTorch's esp-baremetal preset, the
    IDF toolchain file, the model-driven op selection, the pinned version."""
    from .conftest import REPO

    text = (REPO / "scripts/build-executorch-esp.sh").read_text()
    for needle in ("--preset esp-baremetal", "$IDF_PATH/tools/cmake/toolchain-$target.cmake",
                   "-DEXECUTORCH_SELECT_OPS_MODEL=", "-DEXECUTORCH_BUILD_KERNELS_QUANTIZED=ON",
                   "pte_suite extract"):
        assert needle in text, needle
    import importlib.metadata

    assert f"EXECUTORCH_VERSION={importlib.metadata.version('executorch')}" in text
    assert "executorch" not in {p.name for p in REPO.iterdir()}  # nothing of ExecuTorch is vendored


def test_host_runner_is_the_board_runner_core(suite):
    """run_suite runs the board's own C++ core (espnn::pte::RunSuite through
    _et_backend): the memory figures only that core knows are reported, an
    unaligned suite has its program copied as on the chip, and the method
    pool it is given bounds load_method."""
    data = S.write_suite(suite)
    recs, _ = _run(data)
    for r in (r for r in recs if r["kind"] == "RESULT"):
        assert r["program"] == "inplace" and r["planned"] > 0 and r["method_pool"] > 0, r
        assert r["heap_free_min"] is None
    recs = S.run_suite(data, write=lambda line: None, misalign=4)
    assert {r["program"] for r in recs if r["kind"] == "RESULT"} == {"copy-align"}
    recs = S.run_suite(data, write=lambda line: None, method_pool_bytes=256)
    r = [r for r in recs if r["kind"] == "RESULT"]
    assert {(x["status"], x["stage"]) for x in r} == {("error", "method")} and "method pool 256 B" in r[0]["msg"]


def test_a_failing_write_callback_raises_after_the_run(suite):
    def write(line: str) -> None:
        raise OSError("console gone")

    with pytest.raises(OSError, match="console gone"):
        S.run_suite(S.write_suite(suite), write=write)
