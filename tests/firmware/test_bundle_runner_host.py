"""The XTSB bundle format and the board runner's portable core, on the host.

The runner core (components/espnn_test_runner/src/bundle*.cpp, components/espnn_runtime/src/platform_common.cpp,
platform_et_pal.cpp) is what main/ runs on the chip; here it is linked with
the host shell of tests/firmware (stdio_runner.cpp, stdio_pal.cpp) and built
with AddressSanitizer/UBSan when the compiler supports it. The same shell is
cross-built for Xtensa in test_xtensa_sim.py."""

from __future__ import annotations

import re
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from espnn_dev import xts3_mutations as xm
from executorch_espnn import _native
from executorch_espnn import bundle as B

from . import bundle_mutations as bm

REQUIRED_PASS_FIELDS = ["runs", "ops", "arena", "scratch", "model_bytes", "weights", "alloc", "model_mem", "heap_free_min",
                        "cycles_min", "cycles_mean", "cycles_max", "us_min", "us_mean", "us_max"]


def run(runner: Path, *args: str, check_rc: int | None = None) -> subprocess.CompletedProcess:
    r = subprocess.run([str(runner), *args], capture_output=True, text=True, timeout=300)
    assert "runtime error" not in r.stderr and "AddressSanitizer" not in r.stderr, r.stderr[-3000:]
    if check_rc is not None:
        assert r.returncode == check_rc, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    return r


def results(stdout: str) -> dict[str, dict]:
    return {r["case"]: r for r in B.parse_results(stdout) if r["kind"] == "RESULT"}


@pytest.fixture(scope="module")
def corpus_bundle(tmp_path_factory, corpus_cases) -> Path:
    p = tmp_path_factory.mktemp("bundles") / "corpus.xtsb"
    p.write_bytes(B.write_bundle(corpus_cases))
    return p


# ------------------------------------------------------------------ format
def test_writer_layout(corpus_cases):
    data = B.write_bundle(corpus_cases)
    magic, version, hsize, size, flags, count, table, crc, reserved = struct.unpack_from("<IHHIIIIII", data)
    assert (magic, version, hsize, size, flags, count, reserved) == (
        B.MAGIC, 1, 32, len(data), 0, len(corpus_cases), 0)
    assert data[:4] == b"XTSB" and len(data) % 16 == 0
    assert crc == zlib.crc32(data[32:])
    decoded = B.read_bundle(data)
    for c, d in zip(corpus_cases, decoded):
        assert d["name"] == c.name and d["model"] == c.model and d["runs"] == c.runs
        assert d["inputs"] == b"".join(np.ascontiguousarray(a).tobytes() for a in c.inputs)
        assert d["expected"] == b"".join(np.ascontiguousarray(a).tobytes() for a in c.expected)
    for i in range(count):
        rec = struct.unpack_from("<12I", data, table + 48 * i)
        assert rec[2] % 16 == 0 and rec[4] % 16 == 0 and rec[6] % 16 == 0, rec
        assert rec[9:] == (0, 0, 0)


def test_writer_stores_a_shared_model_once():
    v = xm.valid_blobs()[0]
    one = B.write_bundle([B.make_case("a", v.blob, v.feeds)])
    two = B.write_bundle([B.make_case("a", v.blob, v.feeds), B.make_case("b", v.blob, v.feeds, runs=3)])
    cases = B.read_bundle(two)
    assert cases[0]["model_offset"] == cases[1]["model_offset"]
    assert len(two) - len(one) < len(v.blob)


@pytest.mark.parametrize("bad, message", [
    (dict(name="has space"), r"case name 'has space': 1\.\.64 characters"),
    (dict(name="x" * 65), r"1\.\.64 characters"),
    (dict(name=""), r"1\.\.64 characters"),
    (dict(runs=-1), r"runs -1 not in 0\.\.1000000"),
    (dict(runs=1_000_001), r"runs 1000001 not in"),
    (dict(expected=None), r"no expected outputs \(use make_case\)"),
    (dict(model=b""), r"empty model"),
])
def test_writer_rejects_invalid_cases(bad, message):
    v = xm.valid_blobs()[0]
    c = B.make_case("ok", v.blob, v.feeds)
    for k, val in bad.items():
        setattr(c, k, val)
    with pytest.raises(ValueError, match=message):
        B.write_bundle([c])


def test_writer_rejects_duplicate_names_and_empty_bundles():
    v = xm.valid_blobs()[0]
    with pytest.raises(ValueError, match="unique"):
        B.write_bundle([B.make_case("a", v.blob, v.feeds), B.make_case("a", v.blob, v.feeds)])
    with pytest.raises(ValueError, match=r"1\.\.1024 cases, got 0"):
        B.write_bundle([])


def test_make_case_refuses_a_model_the_host_parser_rejects():
    lay = xm.Layout(xm.valid_blobs()[0].blob)
    bad = bytearray(lay.blob)
    struct.pack_into("<I", bad, 0, 0)
    with pytest.raises(ValueError, match="bad magic"):
        B.make_case("bad", bytes(bad))


# ------------------------------------------------------------------ runner
def test_every_corpus_case_passes_in_place(host_runner, corpus_bundle, corpus_cases):
    r = run(host_runner, "--runs=2", str(corpus_bundle), check_rc=0)
    recs = B.parse_results(r.stdout)
    assert recs[0]["kind"] == "BEGIN" and recs[0]["platform"] == "host" and recs[0]["cases"] == len(corpus_cases)
    assert recs[-1] == {"kind": "END", "v": 1, "cases": len(corpus_cases), "passed": len(corpus_cases), "failed": 0}
    got = results(r.stdout)
    assert list(got) == [c.name for c in corpus_cases]
    for c in corpus_cases:
        rec, program = got[c.name], _native.Program(c.model)
        assert rec["status"] == "pass", rec
        assert all(f in rec for f in REQUIRED_PASS_FIELDS), rec
        assert rec["runs"] == 2 and rec["weights"] == "inplace"
        assert rec["arena"] == program.arena_bytes and rec["scratch"] == program.scratch_bytes
        assert rec["ops"] == len(program.summary()["ops"]) and rec["model_bytes"] == len(c.model)
        # the fused regions' descriptions (Interpreter::Init) are a block of their own
        assert rec["alloc"] == program.arena_bytes + program.scratch_bytes + program.persistent_bytes
        # the host has a clock but no cycle counter or heap statistics
        assert rec["cycles_mean"] is None and rec["heap_free_min"] is None
        assert rec["us_min"] <= rec["us_mean"] <= rec["us_max"]


def test_result_line_format_is_stable(host_runner, corpus_bundle):
    """The exact field order of a pass line (parsers on the board side and
    in CI scripts rely on it)."""
    line = next(ln for ln in run(host_runner, str(corpus_bundle)).stdout.splitlines()
                if ln.startswith("ESPNN_RESULT"))
    assert re.fullmatch(
        r"ESPNN_RESULT v=1 case=selfcheck_cnn status=pass runs=3 ops=\d+ arena=\d+ scratch=\d+ model_bytes=\d+ "
        r"weights=inplace alloc=\d+ arena_mem=heap (?:scratch_mem=heap )?model_mem=heap heap_free_min=na cycles_min=na cycles_mean=na cycles_max=na "
        r"us_min=\d+ us_mean=\d+\.\d{3} us_max=\d+", line), line


@pytest.mark.parametrize("misalign", [1, 2, 4, 8, 15])
def test_misaligned_bundle_models_are_copied(host_runner, corpus_bundle, corpus_cases, misalign):
    """An embedded file (EMBED_FILES) has no alignment guarantee: the runner
    copies each model to an aligned block and still verifies bit-exactly."""
    got = results(run(host_runner, f"--misalign={misalign}", str(corpus_bundle), check_rc=0).stdout)
    for c in corpus_cases:
        program = _native.Program(c.model)
        assert got[c.name]["status"] == "pass" and got[c.name]["weights"] == "copy-align"
        assert got[c.name]["alloc"] == (len(c.model) + program.arena_bytes + program.scratch_bytes
                                        + program.persistent_bytes)


def test_aligned_bundle_at_16_bytes_offset_runs_in_place(host_runner, corpus_bundle):
    got = results(run(host_runner, "--misalign=16", str(corpus_bundle), check_rc=0).stdout)
    assert {r["weights"] for r in got.values()} == {"inplace"}


def test_weights_copy_option(host_runner, corpus_bundle):
    got = results(run(host_runner, "--weights=copy", str(corpus_bundle), check_rc=0).stdout)
    assert {r["weights"] for r in got.values()} == {"copy"}
    assert all(r["status"] == "pass" for r in got.values())


def test_pool_memory_source(host_runner, corpus_bundle, corpus_cases):
    """Arena and scratch carved from one pool (the runtime-allocator memory
    source); a pool too small for a case fails that case, not the others."""
    got = results(run(host_runner, "--pool=65536", str(corpus_bundle), check_rc=0).stdout)
    assert all(r["status"] == "pass" for r in got.values())
    small = min(_native.Program(c.model).arena_bytes for c in corpus_cases)
    big_case = max(corpus_cases, key=lambda c: _native.Program(c.model).arena_bytes)
    big = _native.Program(big_case.model).arena_bytes
    r = run(host_runner, f"--pool={small + 15}", str(corpus_bundle), check_rc=1)
    got = results(r.stdout)
    assert got[big_case.name]["status"] == "error" and got[big_case.name]["stage"] == "alloc"
    assert got[big_case.name]["msg"] == f"cannot allocate {big} bytes for the arena (out of memory)"
    assert any(rec["status"] == "pass" for rec in got.values())


def test_out_of_memory_is_reported_per_case(host_runner, corpus_bundle):
    got = results(run(host_runner, "--alloc-limit=1000", "--weights=copy", str(corpus_bundle), check_rc=1).stdout)
    stages = {r["stage"] for r in got.values() if r["status"] == "error"}
    assert stages <= {"place", "alloc"} and stages
    assert any(re.fullmatch(r"cannot allocate \d+ bytes for the (arena|model copy)( \(out of memory\))?", r["msg"])
               for r in got.values() if r["status"] == "error")
    assert any(r["status"] == "pass" for r in got.values())  # small cases fit


def _single(tmp_path: Path, case: B.BundleCase, name: str = "one.xtsb") -> Path:
    p = tmp_path / name
    p.write_bytes(B.write_bundle([case]))
    return p


def test_wrong_output_is_reported_without_timing(host_runner, tmp_path):
    """Verify-then-time: a case whose output differs is never timed; the
    line names the output, the first differing element and both values."""
    v = xm.valid_blobs()[0]  # chain: two outputs (float32, int8)
    case = B.make_case("chain", v.blob, v.feeds)
    exp = [e.copy() for e in case.expected]
    flat = exp[1].reshape(-1)
    flat[3] = np.int8((int(flat[3]) & 0xFF ^ 0x55) - 256 * ((int(flat[3]) & 0xFF ^ 0x55) > 127))
    flat[5] = np.int8(int(flat[5]) ^ 0x01)
    case.expected = exp
    r = run(host_runner, str(_single(tmp_path, case)), check_rc=1)
    rec = results(r.stdout)["chain"]
    want = int(flat[3]) & 0xFF
    assert rec == {"kind": "RESULT", "v": 1, "case": "chain", "status": "mismatch", "stage": "verify",
                   "output": 1, "element": 3, "got": f"0x{want ^ 0x55:02x}",
                   "expected": f"0x{want:02x}", "diff_elements": 2, "of": flat.size}
    assert "cycles_min" not in r.stdout and "us_mean" not in r.stdout


def test_float_output_mismatch_shows_the_whole_element(host_runner, tmp_path):
    v = xm.valid_blobs()[0]
    case = B.make_case("chain", v.blob, v.feeds)
    exp = [e.copy() for e in case.expected]
    exp[0].reshape(-1)[3] += np.float32(1.0)
    case.expected = exp
    rec = results(run(host_runner, str(_single(tmp_path, case)), check_rc=1).stdout)["chain"]
    want = struct.unpack("<I", exp[0].reshape(-1)[3].tobytes())[0]
    assert rec["output"] == 0 and rec["element"] == 3 and rec["expected"] == f"0x{want:08x}"
    assert rec["diff_elements"] == 1


@pytest.mark.parametrize("what", ["inputs", "expected"])
def test_payload_sizes_must_match_the_graph(host_runner, tmp_path, what):
    v = xm.valid_blobs()[0]
    case = B.make_case("chain", v.blob, v.feeds)
    n_in = sum(a.nbytes for a in case.inputs)
    n_out = sum(a.nbytes for a in case.expected)
    if what == "inputs":
        case.inputs = [*case.inputs, np.zeros(1, np.int8)]
        msg = f"{n_in + 1} input bytes in the bundle, the graph's 2 inputs take {n_in}"
    else:
        case.expected = case.expected[:1]
        msg = f"{case.expected[0].nbytes} expected bytes in the bundle, the graph's 2 outputs take {n_out}"
    rec = results(run(host_runner, str(_single(tmp_path, case)), check_rc=1).stdout)["chain"]
    assert (rec["status"], rec["stage"], rec["msg"]) == ("error", what, msg)


def misaligned_constant_case() -> tuple[B.BundleCase, str]:
    """The self-check CNN with a conv's INT32 bias moved 2 bytes off its
    alignment (still inside the CONSTANTS section): the parser must reject it
    (on Xtensa an int32 load from there would trap). Returns the case and the
    host binding's message."""
    from espnn_dev import op_corpus

    blob = dict(op_corpus.op_graphs())["selfcheck_cnn"]
    summary = _native.parse(blob)
    conv = next(op for op in summary["ops"] if op["op"] == "CONV2D")
    bias = conv["inputs"][2]
    assert summary["tensors"][bias]["dtype"] == "INT32" and summary["tensors"][bias]["memory"] == "CONSTANT"
    lay = xm.Layout(blob)
    off = lay.tensor_field(bias, "offset") + 2
    bad = bytearray(blob)
    struct.pack_into("<I", bad, lay.tensor(bias) + _native.TENSOR_FIELDS["offset"], off)
    with pytest.raises(ValueError) as e:
        _native.parse(bytes(bad))
    good = B.make_case("misaligned_bias", blob, seed=3)
    return B.BundleCase("misaligned_bias", bytes(bad), good.inputs, good.expected), str(e.value)


def test_misaligned_typed_constant_is_rejected_by_the_parser(host_runner, tmp_path):
    case, message = misaligned_constant_case()
    assert re.fullmatch(r"tensor \d+: INT32 constant at offset \d+ is not 4-byte aligned", message)
    rec = results(run(host_runner, str(_single(tmp_path, case)), check_rc=1).stdout)["misaligned_bias"]
    assert (rec["status"], rec["stage"], rec["msg"]) == ("error", "parse", message)


def test_malformed_bundles_are_rejected_with_their_reason(host_runner, tmp_path):
    """Every header/record mutation and every truncation of a small bundle:
    the exact parser message, one process, under ASan/UBSan when available."""
    muts = bm.mutations()
    paths = []
    for m in muts:
        p = tmp_path / f"{m.name}.xtsb"
        p.write_bytes(m.data)
        paths.append(str(p))
    r = run(host_runner, *paths, check_rc=1)
    got = bm.parse_multi(r.stdout)
    failures = []
    for m, p in zip(muts, paths):
        lines = got.get(p, [])
        err = [ln for ln in lines if ln.startswith("ESPNN_BUNDLE_ERROR v=1 msg=")]
        ok = (len(lines) == 2 and len(err) == 1 and lines[1] == "ESPNN_END v=1 cases=0 passed=0 failed=1"
              and re.fullmatch(m.message, err[0].split(" msg=", 1)[1]))
        if not ok:
            failures.append(f"{m.name}: {lines}")
    assert not failures, "\n".join(failures[:20])
    assert len(muts) > 1000


def test_a_bundle_in_a_larger_partition_is_accepted(host_runner, tmp_path, corpus_cases):
    """A flash partition is larger than the bundle: bytes after bundle_size
    (erased flash, 0xFF) are ignored."""
    p = tmp_path / "partition.img"
    p.write_bytes(B.write_bundle(corpus_cases[:2]) + b"\xff" * 4096)
    got = results(run(host_runner, str(p), check_rc=0).stdout)
    assert [r["status"] for r in got.values()] == ["pass", "pass"]


def test_platform_selftest_on_the_host(host_runner):
    r = run(host_runner, "--selftest", check_rc=0)
    assert re.search(r"^SELFTEST passed=(\d+) failed=0$", r.stdout, re.M), r.stdout
    assert "FAIL" not in r.stdout


# ------------------------------------------------------------------ tooling
def test_parse_results_tolerates_monitor_prefixes_and_keeps_messages():
    text = ("I (312) boot: ESP-IDF v5.3\n"
            "[12:00:01.5] ESPNN_BEGIN v=1 platform=esp32s3 cpu_hz=240000000 cases=2 bundle_bytes=4096\r\n"
            "ESPNN_RESULT v=1 case=a.b-c status=error stage=parse msg=op 3 (CONV2D): x=1 y = 2\n"
            "ESPNN_RESULT v=1 case=z status=pass runs=5 us_mean=12.250 heap_free_min=na\n"
            "ESPNN_END v=1 cases=2 passed=1 failed=1\n")
    recs = B.parse_results(text)
    assert [r["kind"] for r in recs] == ["BEGIN", "RESULT", "RESULT", "END"]
    assert recs[0]["cpu_hz"] == 240_000_000 and recs[0]["platform"] == "esp32s3"
    assert recs[1]["msg"] == "op 3 (CONV2D): x=1 y = 2" and recs[1]["case"] == "a.b-c"
    assert recs[2]["us_mean"] == 12.25 and recs[2]["heap_free_min"] is None


def test_cli_demo_pack_inspect_results(host_runner, tmp_path, capsys):
    demo = tmp_path / "demo.xtsb"
    assert B.main(["demo", "-o", str(demo), "--runs", "4"]) == 0
    model = tmp_path / "chain.xts3"
    model.write_bytes(xm.valid_blobs()[0].blob)
    packed = tmp_path / "packed.xtsb"
    assert B.main(["pack", str(model), "-o", str(packed)]) == 0
    assert B.main(["inspect", str(demo)]) == 0
    assert "selfcheck_cnn: model" in capsys.readouterr().out
    log = tmp_path / "monitor.log"
    log.write_text(run(host_runner, str(demo), str(packed), check_rc=0).stdout)
    capsys.readouterr()
    assert B.main(["results", str(log)]) == 0
    import json

    recs = json.loads(capsys.readouterr().out)
    assert [(r["case"], r["status"], r["runs"]) for r in recs if r["kind"] == "RESULT"] == [
        ("selfcheck_cnn", "pass", 4), ("chain", "pass", 3)]
