"""main/'s .pte mode on the host: components/espnn_test_runner/src/pte_runner.cpp (ExecuTorch's C++
Program/Method API + the component's XTSP suite parser + the C++
EspNNBackend) built by tests/firmware/pte_host against the executorch
wheel's libexecutorch.so and kernel libraries, run on suites written by
executorch_espnn.pte_suite. Its lines must agree with pte_suite.run_suite,
which runs the same C++ core through the Python extension (_et_backend) with
the host platform of the binding instead of the stdio shell and PAL.

The device parser of the suite container (src/pte_suite.cpp) is also checked
against pte_suite.py through the bundle_runner shell (--inspect-suite),
which test_xtensa_sim.py runs on Xtensa too. (pte_suite.py takes the
container's constants from the parser's header through the binding, so
there is no second copy of them to compare.)"""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("executorch")

from executorch_espnn import pte_suite as S  # noqa: E402
from executorch_espnn.bundle import parse_results  # noqa: E402

from . import pte_models  # noqa: E402
from .suite_mutations import inspect_lines, suite_mutations, synthetic_suite  # noqa: E402


@pytest.fixture(scope="module")
def suite(pte) -> S.PteSuite:
    return S.make_suite(pte, cases=3, runs=2)


def run_cpp(runner: Path, suite_bytes: bytes, tmp_path: Path, *args: str) -> tuple[int, list[dict], str]:
    p = tmp_path / "suite.xtsp"
    p.write_bytes(suite_bytes)
    r = subprocess.run([str(runner), *args, str(p)], capture_output=True, text=True, timeout=300)
    assert "runtime error" not in r.stderr and "AddressSanitizer" not in r.stderr, r.stderr[-3000:]
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


def _same_records(cpp: list[dict], py: list[dict]) -> None:
    """Same keys in the same order, same values except measurements and the
    platform's name."""
    assert [list(r) for r in cpp] == [list(r) for r in py]
    measured = {"platform", "us_min", "us_mean", "us_max", "planned", "method_pool"}
    for a, b in zip(cpp, py):
        assert {k: v for k, v in a.items() if k not in measured} == {
            k: v for k, v in b.items() if k not in measured}, (a, b)


def test_cpp_and_python_runners_print_the_same_records(pte_runner, suite, tmp_path):
    s = copy.deepcopy(suite)
    s.cases[1].expected[0].reshape(-1)[7] += np.float32(0.5)
    data = S.write_suite(s)
    _, cpp, out = run_cpp(pte_runner, data, tmp_path)
    _same_records(cpp, S.run_suite(data, write=lambda line: None))
    mismatch = results(cpp)[1]
    assert (mismatch["status"], mismatch["stage"], mismatch["output"], mismatch["element"]) == (
        "mismatch", "verify", 0, 7)


def test_cpp_and_python_runners_report_the_same_errors(pte_runner, suite, tmp_path):
    s = copy.deepcopy(suite)
    s.cases[0].inputs = [np.zeros((1, 3, 4, 4), np.float32)]
    s.cases[1].inputs = [np.zeros((1, 3, 8, 8), np.int8)]
    s.cases[2].inputs = []
    data = S.write_suite(s)
    _, cpp, _ = run_cpp(pte_runner, data, tmp_path)
    _same_records(cpp, S.run_suite(data, write=lambda line: None))
    assert [r["stage"] for r in results(cpp)] == ["inputs"] * 3
    s = copy.deepcopy(suite)
    s.method = "missing"
    data = S.write_suite(s)
    _, cpp, _ = run_cpp(pte_runner, data, tmp_path)
    _same_records(cpp, S.run_suite(data, write=lambda line: None))


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


def test_corrupt_programs_are_refused_before_executorch_loads_them(pte_runner, tmp_path):
    """The corrupted programs of tests/hardening/data in a suite: the
    runner's check (espnn/pte_check.h) refuses each one as a load error,
    naming the delegate field; without it ExecuTorch's load_method would
    dereference mutated-segv.pte's missing processed-data reference
    (SIGSEGV). The valid original they were mutated from passes."""
    data = Path(__file__).parent.parent / "hardening" / "data"
    good = S.make_suite((data / "original.pte").read_bytes(), cases=2, runs=1)
    rc, recs, out = run_cpp(pte_runner, S.write_suite(good), tmp_path)
    assert rc == 0 and [r["status"] for r in results(recs)] == ["pass", "pass"], out
    for name, fragment in (("mutated-segv.pte", "no processed-data reference"),
                           ("mutated-abort.pte", "the backend id 'EspN????kend' has a byte 0xea")):
        bad = copy.deepcopy(good)
        bad.pte = (data / name).read_bytes()
        rc, recs, out = run_cpp(pte_runner, S.write_suite(bad), tmp_path)
        assert rc == 1, (name, rc, out)
        assert {(r["status"], r["stage"]) for r in results(recs)} == {("error", "load")}, out
        msg = results(recs)[0]["msg"]
        assert msg.startswith("the program fails the check: method 0 ('forward') delegate 0: ") and fragment in msg, msg


def test_out_of_memory_is_reported_per_case(pte_runner, suite, tmp_path):
    """Pools fit, the planned buffer does not (the platform's live-byte cap):
    every case says which allocation failed; nothing is run."""
    pools = ["--method-pool=8192", "--temp-pool=1024"]
    rc, recs, out = run_cpp(pte_runner, S.write_suite(suite), tmp_path, *pools, "--alloc-limit=9300")
    assert rc == 1, out
    assert {(r["stage"], r["msg"].split(" (")[0]) for r in results(recs)} == {
        ("method", "cannot allocate planned buffer 0")}
    rc, recs, out = run_cpp(pte_runner, S.write_suite(suite), tmp_path, *pools, "--misalign=3",
                            f"--alloc-limit={8192 + 1024 + 64}")
    assert rc == 1 and "cannot allocate" in results(recs)[0]["msg"], out
    rc, recs, out = run_cpp(pte_runner, S.write_suite(suite), tmp_path, *pools)
    assert rc == 0 and {r["program"] for r in results(recs)} == {"inplace"}, out


def test_bad_suites_are_rejected_before_anything_runs(pte_runner, suite, tmp_path):
    data = bytearray(S.write_suite(suite))
    data[-1] ^= 1
    rc, recs, _ = run_cpp(pte_runner, bytes(data), tmp_path)
    assert rc == 1 and recs[0]["kind"] == "SUITE_ERROR" and "CRC-32" in recs[0]["msg"]
    assert "does not match the header's" in recs[0]["msg"]
    assert recs[-1]["failed"] == 1 and not results(recs)


# ------------------------------------------------------------------ the device parser
def test_device_parser_reads_what_python_wrote(host_runner, pte, tmp_path):
    for name, s in (("synthetic", synthetic_suite()), ("real", S.make_suite(pte, cases=2))):
        p = tmp_path / f"{name}.xtsp"
        p.write_bytes(S.write_suite(s))
        r = subprocess.run([str(host_runner), "--inspect-suite", str(p)], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.splitlines() == inspect_lines(S.read_suite(p.read_bytes()))


def test_device_parser_rejects_malformed_suites(host_runner, suite, tmp_path):
    data = S.write_suite(suite)
    for name, bad, fragment in suite_mutations(data):
        p = tmp_path / f"{name}.xtsp"
        p.write_bytes(bad)
        r = subprocess.run([str(host_runner), "--inspect-suite", str(p)], capture_output=True, text=True)
        assert r.returncode == 1 and r.stdout.startswith("SUITE_ERROR msg="), (name, r.stdout, r.stderr)
        assert fragment in r.stdout, (name, r.stdout)


def test_a_channels_last_input_is_refused_by_the_delegate_in_pte_mode(capfd):
    """The device-side dim-order refusal, through the board runner's C++ core
    and ExecuTorch's runtime: a program that records a channels-last input
    hands it to the EspNNBackend delegate, which refuses it (InvalidArgument,
    logged naming the input). The suite's negative case passes only then;
    the same flag on a program that runs fails (negative control)."""
    import numpy as np

    from firmware import pte_models

    suite = pte_models.dim_order_refusal_suite()
    assert S.read_suite(S.write_suite(suite)).cases[0].expect_invalid_argument
    recs = S.run_suite(S.write_suite(suite), write=lambda line: None)
    result = [r for r in recs if r["kind"] == "RESULT"]
    assert [(r["case"], r["status"], r.get("refused")) for r in result] == [
        ("dim_order_refused", "pass", "InvalidArgument")]
    assert "EspNNBackend: input 0 is not in contiguous dim order" in capfd.readouterr().err

    x = np.zeros(pte_models.INPUT_SHAPE, np.float32)
    control = S.PteSuite(pte_models.conv_then_cpu_pte(), "forward",
                         [S.PteCase("runs_fine", [x], [], expect_invalid_argument=True)])
    recs = S.run_suite(S.write_suite(control), write=lambda line: None)
    assert recs[-1]["failed"] == 1
    assert "expected Method::execute to refuse the inputs (InvalidArgument), got Error::Ok" in recs[-2]["msg"]
