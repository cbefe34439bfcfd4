"""Init/invoke/destroy cycles leak nothing and allocate nothing in the
runtime, checked natively under AddressSanitizer + LeakSanitizer.

host/fuzz/lifecycle_check.cpp (built here with -fsanitize=address,undefined,
64-bit and -m32) parses every accepted graph of the test corpora, then runs
several cycles of: fresh arena and scratch -> Interpreter::Init -> Invoke ->
free; re-initializes one long-lived Interpreter with every model in turn;
and checks that Init refuses a too-small or misaligned arena. The runtime
never allocates (ParseModel, ComputeMemoryRequirements, Init and Invoke are
counted through the sanitizer allocator's hooks), so what LeakSanitizer
checks at exit is that the harness's init/destroy path, which a device
application mirrors, gives back everything. A deliberately leaking run is
the negative control that shows the leak check is live.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from espnn_dev import op_corpus
from support import toolchain
from espnn_dev import xts3_mutations as xm
from espnn_dev import regression_blobs

REPO = Path(__file__).resolve().parents[2]
SANITIZE = "-O1 -g1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
ENV = {"ASAN_OPTIONS": "detect_leaks=1:halt_on_error=1:exitcode=99",
       "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}
VARIANTS = {"asan64": SANITIZE, "asan_m32": f"-m32 {SANITIZE}"}


def _probe(flags: str, d: Path) -> str | None:
    src = d / "probe.cpp"
    src.write_text("#include <stdio.h>\nint main() { puts(\"ok\"); return 0; }\n")
    r = subprocess.run(["g++", *flags.split(), str(src), "-o", str(d / "probe")], capture_output=True, text=True)
    if r.returncode != 0:
        return f"g++ {flags} cannot link: {r.stderr.strip()[-200:]}"
    r = subprocess.run([str(d / "probe")], capture_output=True, text=True, env={**os.environ, **ENV})
    return None if r.returncode == 0 else f"a trivial program built with {flags} does not run"


@pytest.fixture(scope="module")
def checkers(tmp_path_factory) -> dict[str, Path | str]:
    toolchain.require("cmake", "cc", "g++")
    root = tmp_path_factory.mktemp("lifecycle")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    out: dict[str, Path | str] = {}
    procs = {}
    for name, flags in VARIANTS.items():
        (root / f"probe_{name}").mkdir()
        why = _probe(flags, root / f"probe_{name}")
        if why:
            out[name] = why + (" (install g++-multilib)" if "-m32" in flags else "")
            continue
        b = root / name
        cfg = ["cmake", "-S", str(REPO / "host"), "-B", str(b), *gen, "-DCMAKE_BUILD_TYPE=None",
               "-DESPNN_BUILD_PYTHON=OFF", "-DESPNN_BUILD_FUZZERS=ON", f"-DCMAKE_C_FLAGS={flags}",
               f"-DCMAKE_CXX_FLAGS={flags}", f"-DCMAKE_EXE_LINKER_FLAGS={flags}"]
        script = " ".join(f"'{a}'" for a in cfg) + f" && cmake --build '{b}' --target lifecycle_check -j {os.cpu_count() or 2}"
        env = {k: v for k, v in os.environ.items() if k != "ESPNN_DIR"}
        procs[name] = (subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, env=env), b)
    for name, (p, b) in procs.items():
        log, _ = p.communicate()
        if p.returncode != 0:
            pytest.fail(f"building lifecycle_check ({name}) failed:\n{log[-3000:]}")
        out[name] = b / "fuzz" / "lifecycle_check"
    return out


@pytest.fixture(scope="module")
def graphs(tmp_path_factory) -> list[str]:
    d = tmp_path_factory.mktemp("lifecycle_graphs")
    blobs = [*op_corpus.op_graphs(), *((v.name, v.blob) for v in xm.valid_blobs()),
             *((c.name, c.blob) for c in regression_blobs.cases() if c.expect is None)]
    paths = []
    for name, blob in blobs:
        p = d / f"{name}.xts3"
        p.write_bytes(blob)
        paths.append(str(p))
    return paths


def _checker(checkers, variant) -> Path:
    c = checkers[variant]
    if isinstance(c, str):
        pytest.skip(f"{variant}: {c}")
    return c


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_cycles_leak_and_allocate_nothing(checkers, graphs, variant):
    tool = _checker(checkers, variant)
    r = subprocess.run([str(tool), "--cycles=3", *graphs], capture_output=True, text=True,
                       env={**os.environ, **ENV}, timeout=300)
    assert r.returncode == 0 and r.stderr == "", f"exit {r.returncode}:\n{r.stderr[-4000:]}"
    assert r.stdout.strip() == f"lifecycle_check: {len(graphs)} files, {len(graphs)} accepted, 3 cycles each, 0 failures"


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_leak_check_is_live(checkers, graphs, variant):
    """Negative control: one arena deliberately not freed is reported."""
    tool = _checker(checkers, variant)
    r = subprocess.run([str(tool), "--cycles=1", "--leak", graphs[0]], capture_output=True, text=True,
                       env={**os.environ, **ENV}, timeout=120)
    assert r.returncode == 99, r.stderr[-2000:]
    assert "ERROR: LeakSanitizer: detected memory leaks" in r.stderr
    assert "RunOnce" in r.stderr  # the leaked block is the arena allocated in RunOnce
