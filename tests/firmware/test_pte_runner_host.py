"""main/'s .pte mode on the host: main/pte_runner.cpp (ExecuTorch's C++
Program/Method API + the component's XTSP suite parser + the C++
EspNNBackend) built by tests/firmware/pte_host against the executorch
wheel's libexecutorch.so and kernel libraries, run on suites written by
executorch_espnn.pte_suite. Its lines must agree with the Python host runner
(pte_suite.run_suite), which runs the same suite through executorch.runtime.

The device parser of the suite container (src/pte_suite.cpp) is also checked
against pte_suite.py through the bundle_runner shell (--inspect-suite,
--print-pte-format), which test_xtensa_sim.py runs on Xtensa too."""

from __future__ import annotations

import copy
import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("executorch")

from executorch_espnn import pte_suite as S  # noqa: E402
from executorch_espnn.bundle import parse_results  # noqa: E402

from . import pte_models  # noqa: E402
from .conftest import REPO  # noqa: E402


def _et_root() -> Path:
    import executorch

    return Path(list(executorch.__path__)[0])


@pytest.fixture(scope="session")
def pte_runner(tmp_path_factory) -> Path:
    """tests/firmware/pte_host built against the installed executorch wheel."""
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed")
    et = _et_root()
    if not (et / "lib/libexecutorch.so").is_file():
        pytest.skip(f"the executorch wheel at {et} has no lib/libexecutorch.so (needs executorch >= 1.5)")
    build = tmp_path_factory.mktemp("pte_host")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    env = {k: v for k, v in os.environ.items() if k != "ESPNN_DIR"}
    for cmd in (["cmake", "-S", str(REPO / "tests/firmware/pte_host"), "-B", str(build), *gen,
                 "-DCMAKE_BUILD_TYPE=Release", f"-DET_ROOT={et}"],
                ["cmake", "--build", str(build), "--target", "pte_runner", "-j", str(os.cpu_count() or 2)]):
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            pytest.fail(f"{' '.join(cmd)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return build / "pte_runner"


@pytest.fixture(scope="module")
def pte() -> bytes:
    import executorch_espnn

    if executorch_espnn._et_backend is None:
        pytest.skip(f"executorch_espnn._et_backend is missing: {executorch_espnn.ET_BACKEND_ERROR}")
    return pte_models.conv_then_cpu_pte()


@pytest.fixture(scope="module")
def suite(pte) -> S.PteSuite:
    return S.make_suite(pte, cases=3, runs=2)


def run_cpp(runner: Path, suite_bytes: bytes, tmp_path: Path, *args: str) -> tuple[int, list[dict], str]:
    p = tmp_path / "suite.xtsp"
    p.write_bytes(suite_bytes)
    r = subprocess.run([str(runner), *args, str(p)], capture_output=True, text=True, timeout=300)
    return r.returncode, parse_results(r.stdout), r.stdout


def results(recs: list[dict]) -> list[dict]:
    return [r for r in recs if r["kind"] == "RESULT"]


def test_cpp_runner_passes_the_suite_and_reports_memory(pte_runner, suite, tmp_path):
    rc, recs, out = run_cpp(pte_runner, S.write_suite(suite), tmp_path)
    assert rc == 0, out
    begin = recs[0]
    assert begin["kind"] == "BEGIN" and begin["mode"] == "pte" and begin["cases"] == 3
    assert begin["pte_bytes"] == len(suite.pte) and begin["method"] == "forward"
    res = results(recs)
    assert [r["case"] for r in res] == ["case0", "case1", "case2"]
    for r in res:
        assert r["status"] == "pass" and r["runs"] == 2 and r["program"] == "inplace"
        assert r["planned"] > 0 and 0 < r["method_pool"] <= 64 * 1024
        assert r["us_min"] <= r["us_max"]
    assert recs[-1] == {"kind": "END", "v": 1, "mode": "pte", "cases": 3, "passed": 3, "failed": 0}


def test_cpp_and_python_runners_print_the_same_records(pte_runner, suite, tmp_path):
    """Same keys in the same order, same verdicts; only measured values and
    the figures Python cannot see ("na" there) differ."""
    s = copy.deepcopy(suite)
    s.cases[1].expected[0].reshape(-1)[7] += np.float32(0.5)
    data = S.write_suite(s)
    _, cpp, out = run_cpp(pte_runner, data, tmp_path)
    py = S.run_suite(data, write=lambda line: None)
    assert [list(r) for r in cpp] == [list(r) for r in py]
    measured = {"platform", "us_min", "us_mean", "us_max", "planned", "method_pool"}
    for a, b in zip(cpp, py):
        assert {k: v for k, v in a.items() if k not in measured} == {
            k: v for k, v in b.items() if k not in measured}, (a, b)
    mismatch = results(cpp)[1]
    assert (mismatch["status"], mismatch["stage"], mismatch["output"], mismatch["element"]) == (
        "mismatch", "verify", 0, 7)


def test_misaligned_suite_copies_the_program(pte_runner, suite, tmp_path):
    rc, recs, out = run_cpp(pte_runner, S.write_suite(suite), tmp_path, "--misalign=4")
    assert rc == 0, out
    assert {r["program"] for r in results(recs)} == {"copy-align"}


def test_tolerance_rule_matches_python(pte_runner, suite, tmp_path):
    s = copy.deepcopy(suite)
    s.cases[0].expected[0] = s.cases[0].expected[0] + np.float32(1e-3)
    s.cases[0].atol = 2e-3
    s.cases[1].expected[0] = s.cases[1].expected[0] + np.float32(1e-2)
    s.cases[1].atol = 2e-3
    _, recs, out = run_cpp(pte_runner, S.write_suite(s), tmp_path)
    res = results(recs)
    assert (res[0]["status"], res[0]["tolerance"]) == ("pass", "atol")
    assert res[1]["status"] == "mismatch" and res[2]["status"] == "pass"


def test_errors_are_result_lines(pte_runner, suite, tmp_path):
    s = copy.deepcopy(suite)
    s.method = "missing"
    _, recs, _ = run_cpp(pte_runner, S.write_suite(s), tmp_path)
    assert {(r["status"], r["stage"]) for r in results(recs)} == {("error", "method")}
    assert "no method 'missing'" in results(recs)[0]["msg"]
    s = copy.deepcopy(suite)
    s.cases[0].inputs = [np.zeros((1, 3, 4, 4), np.float32)]
    s.cases[1].inputs = [np.zeros((1, 3, 8, 8), np.int8)]
    _, recs, _ = run_cpp(pte_runner, S.write_suite(s), tmp_path)
    res = results(recs)
    assert (res[0]["stage"], res[1]["stage"], res[2]["status"]) == ("inputs", "inputs", "pass")
    assert "shape" in res[0]["msg"] and "int8" in res[1]["msg"]
    s = copy.deepcopy(suite)
    s.pte = b"\0" * 64
    rc, recs, _ = run_cpp(pte_runner, S.write_suite(s), tmp_path)
    assert rc == 1 and {r["stage"] for r in results(recs)} == {"load"}
    rc, recs, _ = run_cpp(pte_runner, S.write_suite(suite), tmp_path, "--method-pool=256")
    assert rc == 1 and {r["stage"] for r in results(recs)} == {"method"}
    assert "method pool 256 B" in results(recs)[0]["msg"]


def test_bad_suites_are_rejected_before_anything_runs(pte_runner, suite, tmp_path):
    data = bytearray(S.write_suite(suite))
    data[-1] ^= 1
    rc, recs, _ = run_cpp(pte_runner, bytes(data), tmp_path)
    assert rc == 1 and recs[0]["kind"] == "SUITE_ERROR" and "CRC-32 mismatch" in recs[0]["msg"]
    assert recs[-1]["failed"] == 1 and not results(recs)


# ------------------------------------------------------------------ the device parser
def test_python_layout_matches_the_cpp_header(host_runner):
    out = subprocess.run([str(host_runner), "--print-pte-format"], capture_output=True, text=True,
                         check=True).stdout
    cpp = {k: int(v) for k, v in (ln.split("=") for ln in out.split())}
    py = {"MAGIC": S.MAGIC, "VERSION": S.VERSION, "HEADER_SIZE": S.HEADER_SIZE,
          "CASE_RECORD_SIZE": S.CASE_RECORD_SIZE, "TENSOR_RECORD_SIZE": S.TENSOR_RECORD_SIZE,
          "PTE_ALIGNMENT": S.PTE_ALIGNMENT, "DATA_ALIGNMENT": S.DATA_ALIGNMENT, "MAX_CASES": S.MAX_CASES,
          "MAX_NAME_BYTES": S.MAX_NAME_BYTES, "MAX_METHOD_BYTES": S.MAX_METHOD_BYTES,
          "MAX_TENSORS": S.MAX_TENSORS, "MAX_RANK": S.MAX_RANK, "MAX_RUNS": S.MAX_RUNS}
    py.update({f"HDR_{k.upper()}": v for k, v in S.HEADER_FIELDS.items()})
    py.update({f"CASE_{k.upper()}": v for k, v in S.CASE_FIELDS.items()})
    py.update({f"TENSOR_{k.upper()}": v for k, v in S.TENSOR_FIELDS.items()})
    py.update({f"DTYPE_{np.dtype(d).name}": code for d, code in S.DTYPE_CODES.items()})
    assert cpp == py


def inspect_lines(s: S.PteSuite) -> list[str]:
    """What `bundle_runner --inspect-suite` prints for a valid suite."""
    def tensors(arrays, atols):
        out = ""
        for a, t in zip(arrays, atols):
            out += f" {a.dtype.name}[{','.join(map(str, a.shape))}]" + (f"~{t:g}" if t > 0 else "")
        return out

    lines = [f"SUITE method={s.method} pte_bytes={len(s.pte)} pte_crc={zlib.crc32(s.pte):08x} "
             f"cases={len(s.cases)}"]
    for c in s.cases:
        lines.append(f"CASE {c.name} runs={c.runs} in{tensors(c.inputs, [0] * len(c.inputs))} "
                     f"out{tensors(c.expected, c.atols())}")
    return lines


def test_device_parser_reads_what_python_wrote(host_runner, pte, tmp_path):
    ins = [np.arange(6, dtype=np.int8).reshape(2, 3), np.array(True), np.zeros((0, 4), np.int32),
           np.ones((1, 2, 1, 1, 1, 1, 1, 2), np.float16)]
    outs = [np.linspace(0, 1, 5, dtype=np.float32), np.arange(4, dtype=np.int64).reshape(1, 1, 2, 2),
            np.zeros(3, np.float64), np.zeros(2, np.uint8), np.zeros(2, np.int16)]
    s = S.PteSuite(pte, "forward", [S.PteCase("mixed", ins, outs, runs=7, atol=[0.25, 0, 0.5, 0, 0]),
                                    S.PteCase("b", ins[:1], outs[:1])])
    p = tmp_path / "s.xtsp"
    p.write_bytes(S.write_suite(s))
    r = subprocess.run([str(host_runner), "--inspect-suite", str(p)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == inspect_lines(S.read_suite(p.read_bytes()))


def _recrc(data: bytearray) -> bytes:
    struct.pack_into("<I", data, 40, zlib.crc32(bytes(data[48:])))
    return bytes(data)


def suite_mutations(data: bytes) -> list[tuple[str, bytes, str]]:
    """(name, bytes, expected message fragment) of malformed suites; the
    CRC is fixed up so each reaches the check it targets."""
    first_case = 48
    in_tab = struct.unpack_from("<I", data, first_case + 8)[0]
    out_tab = struct.unpack_from("<I", data, first_case + 16)[0]

    def put(off: int, fmt: str, value) -> bytes:
        b = bytearray(data)
        struct.pack_into(fmt, b, off, value)
        return _recrc(b)

    return [
        ("truncated", data[:len(data) // 2], "exceeds the"),
        ("magic", b"XTSB" + data[4:], "bad magic"),
        ("version", put(4, "<H", 2), "version 2"),
        ("crc", data[:-1] + bytes([data[-1] ^ 1]), "CRC-32 mismatch"),
        ("case_count", put(32, "<I", 0), "case_count 0"),
        ("pte_misaligned", put(16, "<I", struct.unpack_from("<I", data, 16)[0] + 4), "aligned"),
        ("method_name", put(struct.unpack_from("<I", data, 24)[0], "<B", ord(" ")), "identifier"),
        ("no_outputs", put(first_case + 20, "<I", 0), "0 outputs"),
        ("dtype", put(in_tab, "<I", 15), "dtype code 15"),
        ("rank", put(in_tab + 4, "<I", 9), "rank 9"),
        ("dims_vs_size", put(in_tab + 32, "<I", 2), "do not match its shape"),
        ("dim_overflow", put(in_tab + 36, "<I", 0x40000000), "overflows"),
        ("data_misaligned", put(in_tab + 8, "<I", struct.unpack_from("<I", data, in_tab + 8)[0] + 4),
         "misaligned or outside"),
        ("input_atol", put(in_tab + 16, "<f", 0.5), "tolerance"),
        ("nan_atol", put(out_tab + 16, "<f", float("nan")), "tolerance"),
        ("case_flags", put(first_case + 28, "<I", 1), "flags"),
        ("runs", put(first_case + 24, "<I", S.MAX_RUNS + 1), "runs"),
    ]


def test_device_parser_rejects_malformed_suites(host_runner, suite, tmp_path):
    data = S.write_suite(suite)
    for name, bad, fragment in suite_mutations(data):
        p = tmp_path / f"{name}.xtsp"
        p.write_bytes(bad)
        r = subprocess.run([str(host_runner), "--inspect-suite", str(p)], capture_output=True, text=True)
        assert r.returncode == 1 and r.stdout.startswith("SUITE_ERROR msg="), (name, r.stdout, r.stderr)
        assert fragment in r.stdout, (name, r.stdout)
