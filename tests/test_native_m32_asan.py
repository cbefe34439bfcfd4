"""The parser and interpreter built with -m32 and with ASan+UBSan, on the
parser test corpus: every verdict must equal the 64-bit Python binding's.

On the ESP32 size_t and pointers are 32 bits wide, so an offset + size or
count * record_size that would overflow there but not on a 64-bit host is
only caught by running the same C++ where size_t is 32 bits. This file builds
host/tools/xts3_tool.cpp (the runtime + the ESP-NN stand-in, through
host/CMakeLists.txt with -DESPNN_BUILD_PYTHON=OFF -DESPNN_BUILD_TOOLS=ON) in
three variants, in a session-scoped temporary build directory:

  m32           -m32 (gcc-multilib / g++-multilib)
  asan64        64-bit, -fsanitize=address,undefined -fno-sanitize-recover=all
  asan_m32      -m32 with the same sanitizers (needs the 32-bit runtimes)

and runs each in one process over the graphs of tools/espnn_dev/op_corpus.py,
the single-op seeds of host/fuzz/corpus/run/ (op_NAME_0.xts3: the smallest
graph of each op alone that tests/ops builds, written by
host/fuzz/make_corpus.py and kept current by tests/hardening/test_fuzz_seeds.py)
and the corpus of tools/espnn_dev/xts3_mutations.py (the valid blobs, every
truncation, every huge-field and PARAMS mutation). Between them the op
corpus and the seeds use every opcode, so a new op is exercised here once
its seed is generated, with no hand-written graph. For
each blob the tool's verdict (OK / REJECT and the message text) must equal
what executorch_espnn._native says, and for accepted blobs the output bytes
must equal the binding's outputs on the same inputs (written to FILE.in).
The process must exit 0 with nothing on stderr (a sanitizer report fails the
test). A variant whose toolchain is missing is skipped with the reason.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from espnn_dev import op_corpus
from support import toolchain
from espnn_dev import xts3_mutations as xm
from executorch_espnn import _native as fmt

REPO = Path(__file__).resolve().parents[1]
SINGLE_OP_SEEDS = REPO / "host" / "fuzz" / "corpus" / "run"
# -O1 keeps the sanitizer builds quick; -g1 gives reports line numbers.
SANITIZE = "-O1 -g1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# Plain -m32 (i386, x87 floating point). Should x87's excess precision ever
# make a float op differ from the 64-bit build, compare with
# -msse2 -mfpmath=sse, which evaluates in float like the ESP32's FPU, before
# calling it a runtime bug.
M32 = "-m32"
TOOL_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:halt_on_error=1:abort_on_error=0:exitcode=99",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
}


@dataclass(frozen=True)
class Variant:
    name: str
    flags: str
    bits: int
    sanitized: bool


VARIANTS = [
    Variant("m32", f"{M32} -O2", 32, False),
    Variant("asan64", SANITIZE, 64, True),
    Variant("asan_m32", f"{M32} {SANITIZE}", 32, True),
]


def _toolchain_problem(flags: str, tmp: Path) -> str | None:
    """None if gcc and g++ with `flags` link and run a trivial program, else why not."""
    for compiler in ("gcc", "g++"):
        if shutil.which(compiler) is None:
            return f"{compiler} is not installed"
        src = tmp / ("probe.c" if compiler == "gcc" else "probe.cpp")
        src.write_text("#include <stdio.h>\nint main(void) { puts(\"ok\"); return 0; }\n")
        exe = tmp / f"probe_{compiler.replace('+', 'x')}"
        r = subprocess.run([compiler, *flags.split(), str(src), "-o", str(exe)], capture_output=True, text=True)
        if r.returncode != 0:
            return f"`{compiler} {flags}` cannot link a trivial program: {r.stderr.strip()[-300:]}"
        try:
            r = subprocess.run([str(exe)], capture_output=True, text=True, env={**os.environ, **TOOL_ENV})
        except OSError as e:  # e.g. the kernel cannot execute this ABI
            return f"a trivial program built with `{compiler} {flags}` cannot be executed: {e}"
        if r.returncode != 0 or r.stdout.strip() != "ok":
            return f"a trivial program built with `{compiler} {flags}` does not run: {r.stderr.strip()[-300:]}"
    return None


@pytest.fixture(scope="session")
def tools(tmp_path_factory) -> dict[str, Path | str]:
    """Builds xts3_tool in every variant (in parallel). Maps the variant
    name to the tool's path, or to the reason it is skipped. A variant whose
    toolchain works but whose build fails fails the test: the runtime must
    compile for 32-bit targets and under sanitizers."""
    # Without cmake, gcc and g++ every variant is skipped (failed under
    # ESPNN_REQUIRE_TOOLCHAIN=1); a variant whose extra runtime (multilib,
    # sanitizers) is missing is skipped with its own reason below.
    toolchain.require("cmake", "gcc", "g++")
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    root = tmp_path_factory.mktemp("xts3_tool_builds")
    result: dict[str, Path | str] = {}
    procs = {}
    for v in VARIANTS:
        probe = root / f"probe_{v.name}"
        probe.mkdir()
        problem = _toolchain_problem(v.flags, probe)
        if problem:
            hint = " (install gcc-multilib g++-multilib)" if v.bits == 32 else ""
            result[v.name] = problem + hint
            continue
        build = root / v.name
        configure = ["cmake", "-S", str(REPO / "host"), "-B", str(build), *generator,
                     "-DCMAKE_BUILD_TYPE=None", "-DESPNN_BUILD_PYTHON=OFF", "-DESPNN_BUILD_TOOLS=ON",
                     f"-DCMAKE_C_FLAGS={v.flags}", f"-DCMAKE_CXX_FLAGS={v.flags}",
                     f"-DCMAKE_EXE_LINKER_FLAGS={v.flags}"]
        script = (" ".join(f"'{a}'" for a in configure) +
                  f" && cmake --build '{build}' --target xts3_tool -j {os.cpu_count() or 2}")
        env = {k: val for k, val in os.environ.items() if k != "ESPNN_DIR"}
        procs[v.name] = (subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True, env=env), build)
    failures = []
    for name, (proc, build) in procs.items():
        out, _ = proc.communicate()
        if proc.returncode != 0:
            failures.append(f"building xts3_tool ({name}) failed:\n{out[-4000:]}")
        result[name] = build / "xts3_tool"
    if failures:
        pytest.fail("\n".join(failures))
    return result


def _tool(tools, v: Variant) -> Path:
    t = tools[v.name]
    if isinstance(t, str):
        pytest.skip(f"{v.name}: {t}")
    return t


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".xts3"


def _inputs_for(summary: dict, seed: int) -> list[np.ndarray]:
    """Deterministic inputs of the graph's dtypes and shapes, with values that
    exercise saturation, NaN and rounding ties of QUANTIZE."""
    rng = np.random.default_rng(seed)
    feeds = []
    for t in (summary["tensors"][i] for i in summary["inputs"]):
        shape, n = t["shape"], int(np.prod(t["shape"]))
        if t["dtype"] == "FLOAT32":
            a = (rng.standard_normal(n) * 4).astype(np.float32)
            special = np.array([np.nan, np.inf, -np.inf, 1e9, -1e9, 0.025, -0.075, 0.125, -0.0], np.float32)
            ties = np.nextafter(((np.arange(8) - 4 + 0.5) / 20).astype(np.float32), np.float32(1))
            extra = np.concatenate([special, ties])
            a[: min(n, extra.size)] = extra[: min(n, extra.size)]
        elif t["dtype"] == "INT8":
            a = rng.integers(-128, 128, n).astype(np.int8)
        else:
            a = rng.integers(-(2**31), 2**31, n).astype(np.int32)
        feeds.append(a.reshape(shape))
    return feeds


@dataclass(frozen=True)
class Expected:
    verdict: str  # "OK" or "REJECT"
    detail: tuple  # REJECT: (message,); OK: ("arena=..", "scratch=..", hex per output)


def _binding_verdict(blob: bytes, seed: int) -> tuple[Expected, list[np.ndarray] | None]:
    try:
        program = fmt.Program(blob)
    except ValueError as e:
        return Expected("REJECT", (str(e),)), None
    feeds = _inputs_for(program.summary(), seed)
    try:
        outs = program.run(feeds)
    except RuntimeError as e:
        return Expected("REJECT", (str(e),)), feeds
    detail = (f"arena={program.arena_bytes}", f"scratch={program.scratch_bytes}",
              *(np.ascontiguousarray(o).tobytes().hex() for o in outs))
    return Expected("OK", detail), feeds


def single_op_seeds() -> list[tuple[str, bytes]]:
    """(name, blob) of the checked-in single-op fuzz seeds, in name order."""
    return [(p.stem, p.read_bytes()) for p in sorted(SINGLE_OP_SEEDS.glob("op_*.xts3"))]


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> tuple[Path, dict[str, Expected]]:
    """Writes every corpus blob (and FILE.in for accepted ones) to a tmp dir;
    returns the dir and the 64-bit binding's verdict per file."""
    d = tmp_path_factory.mktemp("xts3_corpus")
    expected: dict[str, Expected] = {}
    seeds = [(f"seed_{name}", blob) for name, blob in single_op_seeds()]
    for name, blob in [*op_corpus.op_graphs(), *seeds, *xm.corpus()]:
        path = d / _file_name(name)
        assert str(path) not in expected, f"duplicate corpus name {name}"
        path.write_bytes(blob)
        exp, feeds = _binding_verdict(blob, zlib.crc32(name.encode()))
        assert exp.verdict == "OK" or not name.startswith("seed_"), f"{name}: {exp}"
        if feeds is not None:
            (d / (path.name + ".in")).write_bytes(b"".join(np.ascontiguousarray(f).tobytes() for f in feeds))
        expected[str(path)] = exp
    return d, expected


def _run_tool(tool: Path, files: list[str], *options: str) -> dict[str, Expected]:
    r = subprocess.run([str(tool), *options, "-"], input="\n".join(files) + "\n", capture_output=True, text=True,
                       env={**os.environ, **TOOL_ENV}, timeout=600)
    lines = [ln for ln in r.stdout.split("\n")[:-1]]  # complete lines only
    if r.returncode != 0 or r.stderr != "":
        done = {ln.split("\t", 1)[0] for ln in lines}
        culprit = next((f for f in files if f not in done), None)
        pytest.fail(f"{tool.parent.name}/xts3_tool exited {r.returncode} (first file without a verdict: "
                    f"{culprit}); stderr (sanitizer or heap-use-in-invoke report):\n{r.stderr[-6000:]}")
    got: dict[str, Expected] = {}
    for line in lines:
        path, verdict, *detail = line.split("\t")
        assert path not in got, f"two verdicts for {path}"
        got[path] = Expected(verdict, tuple(detail))
    assert set(got) == set(files), "the tool must print one line per file"
    return got


def _elf_class(path: Path) -> int:
    with open(path, "rb") as f:
        head = f.read(5)
    assert head[:4] == b"\x7fELF"
    return {1: 32, 2: 64}[head[4]]


def _opcodes_exercised() -> set[str]:
    seeds = {op["op"] for _, blob in single_op_seeds() for op in fmt.parse(blob)["ops"]}
    return op_corpus.opcodes_used() | seeds


def test_every_opcode_is_exercised():
    # The corpus is also where the tool checks that Invoke allocates nothing,
    # so every op must appear in it: in an op corpus graph or in its
    # single-op seed (a region header such as BAND_LOOP cannot stand alone,
    # so the op corpus's fused graphs hold it).
    missing = sorted(set(fmt.OPCODES) - _opcodes_exercised())
    assert single_op_seeds() and missing == [], (
        f"no op corpus graph and no single-op seed uses {missing}; run "
        "PYTHONPATH=BUILD_DIR/pkg python host/fuzz/make_corpus.py (docs/fuzzing.md, \"Seed corpus\")")


def test_a_new_opcode_is_not_exercised_until_its_seed_exists(monkeypatch):
    """The check above follows the format: one more opcode, in no graph yet."""
    top = max(d["opcode"] for d in fmt.OPCODES.values())
    monkeypatch.setattr(fmt, "OPCODES", {**fmt.OPCODES, "NEW_OP": {**fmt.OPCODES["ADD"], "opcode": top + 1}})
    with pytest.raises(AssertionError, match="host/fuzz/make_corpus.py"):
        test_every_opcode_is_exercised()


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_tool_is_the_variant_it_claims(tools, variant):
    tool = _tool(tools, variant)
    assert _elf_class(tool) == variant.bits
    text = tool.read_bytes()
    assert (b"__asan_" in text and b"__ubsan_" in text) == variant.sanitized


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_verdicts_match_the_64_bit_binding(tools, corpus, variant):
    """Every op corpus graph, single-op seed, truncation, huge-field mutation
    and valid blob: same verdict, same message, same outputs as the Python
    binding, and no sanitizer report."""
    tool = _tool(tools, variant)
    d, expected = corpus
    files = sorted(expected)
    assert sum(Path(f).name.startswith("seed_op_") for f in files) == len(single_op_seeds())
    assert sum(e.verdict == "OK" for e in expected.values()) >= len(xm.valid_blobs())
    assert sum(e.verdict == "REJECT" for e in expected.values()) > 1000
    got = _run_tool(tool, files)
    diffs = [f"{Path(f).name}:\n  binding: {expected[f]}\n  {variant.name}: {got[f]}"
             for f in files if got[f] != expected[f]]
    assert not diffs, f"{len(diffs)} verdicts differ from the 64-bit binding:\n" + "\n".join(diffs[:20])


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_blob_must_be_16_byte_aligned_in_memory(tools, corpus, variant, tmp_path):
    """The binding always copies the blob to an aligned buffer; the tool can
    place it N bytes past a 16-byte boundary."""
    tool = _tool(tools, variant)
    _, expected = corpus
    names = {f"{v.name}.xts3" for v in xm.valid_blobs()}
    valid = [f for f in sorted(expected) if Path(f).name in names]
    assert len(valid) == len(xm.valid_blobs())
    for n in (1, 2, 4, 8, 12):
        for f, e in _run_tool(tool, valid, f"--misalign={n}").items():
            assert e.verdict == "REJECT", f
            assert re.fullmatch(r"blob at 0x[0-9a-f]+ is not 16-byte aligned; copy it to an aligned buffer",
                                e.detail[0]), e.detail
    # 16 bytes past a 16-byte boundary is aligned again: same as the binding.
    for f, e in _run_tool(tool, valid, "--misalign=16").items():
        assert e == expected[f]


@pytest.fixture(scope="session")
def hardening_corpus(tmp_path_factory) -> dict[str, Expected]:
    """The defect-class blobs of tools/espnn_dev/regression_blobs.py, written
    like `corpus` above, with the 64-bit binding's verdict per file."""
    from espnn_dev import regression_blobs

    d = tmp_path_factory.mktemp("hardening_corpus")
    expected: dict[str, Expected] = {}
    for c in regression_blobs.cases():
        path = d / _file_name(f"{c.defect}.{c.name}")
        path.write_bytes(c.blob)
        exp, feeds = _binding_verdict(c.blob, zlib.crc32(c.name.encode()))
        assert (exp.verdict == "OK") == (c.expect is None), f"{c.name}: {exp}"
        if feeds is not None:
            (d / (path.name + ".in")).write_bytes(b"".join(np.ascontiguousarray(f).tobytes() for f in feeds))
        expected[str(path)] = exp
    return expected


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_regression_blobs_match_the_64_bit_binding(tools, hardening_corpus, variant):
    """Every defect class of tests/hardening/test_regressions.py, on -m32 and
    under ASan/UBSan: same verdicts, messages and outputs as the binding."""
    tool = _tool(tools, variant)
    files = sorted(hardening_corpus)
    got = _run_tool(tool, files)
    diffs = [f"{Path(f).name}:\n  binding: {hardening_corpus[f]}\n  {variant.name}: {got[f]}"
             for f in files if got[f] != hardening_corpus[f]]
    assert not diffs, f"{len(diffs)} verdicts differ from the 64-bit binding:\n" + "\n".join(diffs[:20])


@pytest.fixture(scope="session")
def pte_corpus(tmp_path_factory) -> dict[str, Expected]:
    """.pte programs for the device's .pte check (espnn/pte_check.h): the
    valid seeds of host/fuzz/corpus/et_pte, the two corrupted files of tests/hardening/data,
    every truncation of original.pte and every byte of its flatbuffer part
    set to 0x00 and to 0xff; with the 64-bit binding's verdict per file."""
    d = tmp_path_factory.mktemp("pte_corpus")
    data = REPO / "tests" / "hardening" / "data"
    original = (data / "original.pte").read_bytes()
    program_size = int.from_bytes(original[16:24], "little")  # the extended header's
    files = {p.name: p.read_bytes() for p in [*data.glob("*.pte"), *(REPO / "host/fuzz/corpus/et_pte").glob("*.pte")]}
    files.update({f"trunc{n}.pte": original[:n] for n in range(len(original))})
    for i in range(program_size):
        for v in (0x00, 0xFF):
            if original[i] != v:
                files[f"b{i}_{v:02x}.pte"] = original[:i] + bytes([v]) + original[i + 1:]
    expected: dict[str, Expected] = {}
    for name, blob in files.items():
        path = d / name
        path.write_bytes(blob)
        try:
            fmt.check_pte(blob)
            expected[str(path)] = Expected("OK", ())
        except ValueError as e:
            expected[str(path)] = Expected("REJECT", (str(e),))
    return expected


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_pte_check_matches_the_64_bit_binding(tools, pte_corpus, variant):
    """The .pte check on -m32 and under ASan/UBSan, aligned and at odd
    addresses (it reads byte by byte): same verdicts and messages as the
    binding, and no sanitizer report."""
    tool = _tool(tools, variant)
    files = sorted(pte_corpus)
    verdicts = [e.verdict for e in pte_corpus.values()]
    # A cut inside the segments leaves the flatbuffer whole: the check passes it
    # (the loader refuses a segment past the end of the data).
    # Most truncations cut a data segment (rejected since the check covers segments); most byte flips
    # inside the flatbuffer still parse.
    assert verdicts.count("OK") > 1000 and verdicts.count("REJECT") > 3000
    for options in ((), ("--misalign=3",)):
        got = _run_tool(tool, files, *options, "--pte")
        diffs = [f"{Path(f).name}:\n  binding: {pte_corpus[f]}\n  {variant.name}: {got[f]}"
                 for f in files if got[f] != pte_corpus[f]]
        assert not diffs, f"{len(diffs)} verdicts differ from the 64-bit binding:\n" + "\n".join(diffs[:20])
