"""Fixtures of the firmware tests: the host build of the bundle runner, the
op-corpus bundle cases, and a report of the Xtensa measurements printed at
the end of the pytest run (guest instruction counts, code size)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import toolchain

REPO = Path(__file__).resolve().parents[2]

# Filled by test_xtensa_sim.py, printed by pytest_terminal_summary.
XTENSA_REPORT: dict[str, list[str]] = {"icount": [], "size": []}


def build_host_runner(build: Path, extra_flags: str = "") -> Path:
    """Configures host/CMakeLists.txt (tools on, no Python extension) and
    builds the bundle_runner target; returns the executable. Skipped without
    cmake and a C/C++ compiler (failed under ESPNN_REQUIRE_TOOLCHAIN=1)."""
    toolchain.require(*toolchain.cmake_build_tools())
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    configure = ["cmake", "-S", str(REPO / "host"), "-B", str(build), *generator, "-DCMAKE_BUILD_TYPE=Release",
                 "-DESPNN_BUILD_PYTHON=OFF", "-DESPNN_BUILD_TOOLS=ON", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
                 f"-DCMAKE_C_FLAGS={extra_flags}", f"-DCMAKE_CXX_FLAGS={extra_flags}",
                 f"-DCMAKE_EXE_LINKER_FLAGS={extra_flags}"]
    env = {k: v for k, v in os.environ.items() if k != "ESPNN_DIR"}
    for cmd in (configure, ["cmake", "--build", str(build), "--target", "bundle_runner", "-j",
                            str(os.cpu_count() or 2)]):
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            pytest.fail(f"{' '.join(cmd)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return build / "bundle_runner"


SANITIZE = "-O1 -g1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"


def _sanitizers_work(tmp: Path) -> bool:
    src = tmp / "probe.cpp"
    src.write_text("int main() { return 0; }\n")
    try:
        r = subprocess.run(["c++", *SANITIZE.split(), str(src), "-o", str(tmp / "probe")], capture_output=True)
        return r.returncode == 0 and subprocess.run([str(tmp / "probe")]).returncode == 0
    except OSError:
        return False


@pytest.fixture(scope="session")
def host_runner(tmp_path_factory) -> Path:
    """bundle_runner for the host, with ASan+UBSan when the compiler has them
    (a sanitizer report makes the run() helper of the tests fail)."""
    build = tmp_path_factory.mktemp("bundle_runner_host")
    return build_host_runner(build, SANITIZE if _sanitizers_work(build) else "")


@pytest.fixture(scope="session")
def corpus_cases():
    """The op corpus (every XTS3 opcode) and the parser tests' valid blobs as
    bundle cases; expected outputs from the host build of the runtime."""
    import op_corpus

    return op_corpus.bundle_cases()


@pytest.fixture(scope="session")
def pte() -> bytes:
    """pte_models.conv_then_cpu_pte(): a delegated conv, then CPU ops; the
    .pte-mode tests' program. Skipped without the executorch wheel or the
    _et_backend extension that runs suites on the host."""
    pytest.importorskip("executorch")
    import executorch_espnn

    from . import pte_models

    if executorch_espnn._et_backend is None:
        pytest.skip(f"executorch_espnn._et_backend is missing: {executorch_espnn.ET_BACKEND_ERROR}")
    return pte_models.conv_then_cpu_pte()


@pytest.fixture(scope="session")
def xtensa(tmp_path_factory, corpus_cases):
    """The runner cross-built for Xtensa lx106 (xtensa_build.XtensaBuild);
    skipped with the reason when the Debian packages are missing, failed
    instead when ESPNN_REQUIRE_XTENSA=1 (CI)."""
    from executorch_espnn import bundle as B

    from . import xtensa_build

    why = xtensa_build.problem()
    if why:
        if os.environ.get("ESPNN_REQUIRE_XTENSA") == "1":
            pytest.fail(f"ESPNN_REQUIRE_XTENSA=1 but {why}")
        pytest.skip(why)
    d = tmp_path_factory.mktemp("xtensa")
    bundle = d / "corpus.xtsb"
    bundle.write_bytes(B.write_bundle(corpus_cases))
    result = xtensa_build.build(d, bundle)
    if isinstance(result, str):
        pytest.fail(result)
    return result


def _et_root() -> Path:
    import executorch

    return Path(list(executorch.__path__)[0])


@pytest.fixture(scope="session")
def pte_runner(tmp_path_factory, host_runner) -> Path:
    """main/'s .pte runner (tests/firmware/pte_host) built against the
    installed executorch wheel's libexecutorch.so; skipped when executorch
    or the toolchain is missing (toolchain.require)."""
    pytest.importorskip("executorch")
    toolchain.require(*toolchain.cmake_build_tools())
    et = _et_root()
    if not (et / "lib/libexecutorch.so").is_file():
        pytest.skip(f"the executorch wheel at {et} has no lib/libexecutorch.so (needs executorch >= 1.5)")
    build = tmp_path_factory.mktemp("pte_host")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    env = {k: v for k, v in os.environ.items() if k != "ESPNN_DIR"}
    # ASan+UBSan on our code, as the host_runner build whose runtime and
    # kernel libraries are linked in (ExecuTorch's are not instrumented).
    flags = SANITIZE if _sanitizers_work(build) else ""
    for cmd in (["cmake", "-S", str(REPO / "tests/firmware/pte_host"), "-B", str(build), *gen,
                 "-DCMAKE_BUILD_TYPE=Release", f"-DET_ROOT={et}", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
                 f"-DCMAKE_C_FLAGS={flags}", f"-DCMAKE_CXX_FLAGS={flags}", f"-DCMAKE_EXE_LINKER_FLAGS={flags}",
                 f"-DESPNN_PREBUILT_DIR={host_runner.parent}"],
                ["cmake", "--build", str(build), "--target", "pte_runner", "host_pal_objects", "-j",
                 str(os.cpu_count() or 2)]):
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            pytest.fail(f"{' '.join(cmd)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return build / "pte_runner"


def pytest_terminal_summary(terminalreporter):
    if not any(XTENSA_REPORT.values()):
        return
    tr = terminalreporter
    tr.section("firmware: Xtensa lx106 under QEMU (xtensa-sim)")
    for line in XTENSA_REPORT["icount"] + XTENSA_REPORT["size"]:
        tr.write_line(line)
