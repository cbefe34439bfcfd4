"""Cross-building the firmware's portable C++ for Xtensa lx106 with
xtensa-sim (tools/xtensa-sim); used by the `xtensa` fixture."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = "gcc-xtensa-lx106 binutils-xtensa-lx106 picolibc-xtensa-lx106-elf qemu-system-misc"
RUNTIME = REPO / "components/espnn_runtime"
TEST_RUNNER = REPO / "components/espnn_test_runner"
HELLO = RUNTIME / "examples/hello/main"
FIRMWARE = REPO / "tests/firmware"
# ESP-IDF-only sources (esp_timer, heap_caps, esp_cpu, esp_log); documented
# in docs/firmware.md as the thin glue that only ESP-IDF compiles.
ESP_IDF_ONLY = {"platform_esp_idf.cpp"}
# The host's own espnn_pal_* (the Python extension's delegate build); the
# Xtensa shell has tests/firmware/stdio_pal.cpp instead.
HOST_PAL = {"platform_host.cpp"}


def sim_path() -> Path:
    env = os.environ.get("XTENSA_SIM")
    return Path(env) if env else REPO / "tools/xtensa-sim/xtensa-sim"


def problem() -> str | None:
    sim = sim_path()
    if not sim.is_file():
        return f"xtensa-sim not found at {sim} (set XTENSA_SIM)"
    for tool, pkg in (("xtensa-lx106-elf-g++", "gcc-xtensa-lx106"), ("xtensa-lx106-elf-size", "binutils-xtensa-lx106"),
                      ("qemu-system-xtensa", "qemu-system-misc")):
        if shutil.which(tool) is None:
            return f"{tool} not installed (Debian package {pkg}; apt-get install -y {PACKAGES})"
    if not Path("/usr/lib/xtensa-lx106-elf/picolibc.specs").is_file():
        return f"picolibc for lx106 not installed (apt-get install -y {PACKAGES})"
    return None


def kernel_sources() -> tuple[list[Path], list[Path], str]:
    """ESP-NN: the real ANSI C sources when $ESPNN_DIR is set (as the host
    build does), else the project's stand-in."""
    espnn = os.environ.get("ESPNN_DIR")
    if espnn:
        d = Path(espnn)
        return sorted(d.glob("src/*/*_ansi.c")), [d / "include", d / "src/common"], f"esp-nn ANSI C from {d}"
    d = REPO / "host/espnn_standin"
    return sorted((d / "src").glob("*.c")), [d / "include"], "ESP-NN stand-in (host/espnn_standin)"


# The .pte runner core needs ExecuTorch, which is not cross-built here.
EXECUTORCH_ONLY = {"pte_runner.cpp"}


def runtime_sources() -> list[Path]:
    """Every C++ source of the runtime component and of the test runner
    component except the ESP-IDF-only glue and the ExecuTorch-only core."""
    srcs = (sorted((RUNTIME / "src").glob("*.cpp")) + sorted((RUNTIME / "src/ops").glob("*.cpp"))
            + sorted((TEST_RUNNER / "src").glob("*.cpp")))
    return [s for s in srcs if s.name not in ESP_IDF_ONLY | HOST_PAL | EXECUTORCH_ONLY]


def build_inputs() -> tuple[list[Path], list[Path], str]:
    """What build() compiles: (sources, include directories, kernel name).
    With $ESPNN_DIR some sources lie outside the repository."""
    kernels, kernel_includes, kernel_name = kernel_sources()
    shell = [FIRMWARE / "stdio_runner.cpp", FIRMWARE / "stdio_pal.cpp", FIRMWARE / "platform_selftest.cpp",
             HELLO / "hello.cpp"]
    sources = runtime_sources() + kernels + shell
    includes = [RUNTIME / "include", RUNTIME / "src", TEST_RUNNER / "include", *kernel_includes, FIRMWARE, HELLO]
    return sources, includes, kernel_name


@dataclass
class XtensaBuild:
    sim: Path
    elf: Path  # -O2, op corpus embedded as espnn_test_bundle
    elf_os: Path  # -Os, for code size
    sources: list[Path]
    kernels: str

    def run(self, *args: str, icount: bool = False, timeout: int = 120) -> subprocess.CompletedProcess:
        cmd = [str(self.sim), "run", "--timeout", str(timeout)]
        if icount:
            cmd.append("--icount")
        return subprocess.run([*cmd, str(self.elf), *args], capture_output=True, text=True, timeout=timeout + 30)


def _build(sim: Path, out: Path, sources: list[Path], includes: list[Path], opt: str,
           embed: Path | None) -> subprocess.CompletedProcess:
    cmd = [str(sim), "build", "--float", "-o", str(out), "--ram", str(32 << 20)]
    for inc in includes:
        cmd += ["-I", str(inc)]
    cmd += ["--cflags", f"{opt} -fwrapv", "--cxxflags", f"{opt} -Wextra -Werror"]
    if embed is not None:
        cmd += ["--embed", f"{embed}=espnn_test_bundle"]
    return subprocess.run([*cmd, *map(str, sources)], capture_output=True, text=True, timeout=900)


def build(d: Path, bundle: Path) -> XtensaBuild | str:
    """Builds the -O2 runner (bundle embedded) and the -Os one; returns the
    build or the error text."""
    sources, includes, kernel_name = build_inputs()
    sim = sim_path()
    # The two builds share xtensa-sim's one-time downloads (C++ headers,
    # soft-float routines); do the -O2 one first so they are fetched once.
    for opt, elf in (("-O2", d / "runner.elf"), ("-Os", d / "runner_os.elf")):
        r = _build(sim, elf, sources, includes, opt, bundle)
        if r.returncode != 0:
            return f"xtensa-sim build ({opt}) failed:\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    return XtensaBuild(sim, d / "runner.elf", d / "runner_os.elf", sources, kernel_name)


