"""Builds this repository's ESP-IDF project (the runner app in main/ with the
espnn_runtime component) with a real ESP-IDF, in a copy of the project under
a temporary directory so the checkout stays clean (idf.py writes sdkconfig
and dependencies.lock next to the project).

With ESPNN_DEVICE_PREFIX set to the prefix of tools/device-toolchain/build.sh,
everything below comes from that prefix's env.json (what its env.sh exports);
otherwise, from the environment (docs/firmware.md, "Building with
ESP-IDF"):
  IDF_PATH, and idf.py on PATH   `. $IDF_PATH/export.sh` sets both up
  ESPNN_DIR (optional)           an ESP-NN checkout used instead of the
                                 registry's espressif/esp-nn (the component
                                 manager then needs no network)
  ESPNN_IDF_EXTRA_DEFAULTS       (optional) an sdkconfig defaults file added
                                 after the project's, for an ESP-IDF set-up
                                 that needs it (docs/firmware.md: the one
                                 built here lacks Espressif's mbedtls fork
                                 and a GCC that knows -mdisable-hardware-atomics)
Cross targets also need their toolchain on PATH (xtensa-esp32s3-elf-gcc...).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def use_device_prefix() -> str | None:
    """Applies ESPNN_DEVICE_PREFIX/env.json to os.environ (PATH prepended);
    returns why the prefix is unusable, or None (also when it is not set)."""
    prefix = os.environ.get("ESPNN_DEVICE_PREFIX")
    if not prefix:
        return None
    env_file = Path(prefix) / "env.json"
    if not env_file.is_file():
        return (f"ESPNN_DEVICE_PREFIX={prefix} has no env.json "
                "(run tools/device-toolchain/build.sh through its manifest stage)")
    import json

    for key, value in json.loads(env_file.read_text()).items():
        if key == "PATH":
            value = value.replace("$PATH", "").rstrip(":")
            if value not in os.environ.get("PATH", ""):
                os.environ["PATH"] = value + ":" + os.environ.get("PATH", "")
        else:
            os.environ[key] = value
    return None


PREFIX_PROBLEM = use_device_prefix()
PROJECT_FILES = ["CMakeLists.txt", "partitions.csv", "partitions-8mb.csv", "main", "components"]
TOOLCHAIN_PREFIX = {"esp32": "xtensa-esp32-elf-", "esp32s3": "xtensa-esp32s3-elf-",
                    "esp32s2": "xtensa-esp32s2-elf-"}


def problem(target: str = "linux") -> str | None:
    """Why an ESP-IDF build for `target` cannot run here, or None."""
    if PREFIX_PROBLEM:
        return PREFIX_PROBLEM
    idf_path = os.environ.get("IDF_PATH")
    if not idf_path:
        return "ESP-IDF is not set up: IDF_PATH is not set (. $IDF_PATH/export.sh)"
    if not (Path(idf_path) / "tools/idf.py").is_file():
        return f"IDF_PATH={idf_path} is not an ESP-IDF checkout (no tools/idf.py)"
    if not idf_py():
        return "idf.py is not on PATH (. $IDF_PATH/export.sh)"
    espnn = os.environ.get("ESPNN_DIR")
    if espnn and not (Path(espnn) / "idf_component.yml").is_file():
        return f"ESPNN_DIR={espnn} is not an ESP-NN checkout (no idf_component.yml)"
    prefix = TOOLCHAIN_PREFIX.get(target)
    for tool in ("gcc", "g++"):
        if prefix and shutil.which(prefix + tool) is None:
            return f"no {target} toolchain: {prefix}{tool} is not on PATH (docs/device-toolchain.md)"
    return None


def idf_py() -> list[str]:
    """The idf.py command line: with ESP-IDF's own Python environment
    (IDF_PYTHON_ENV_PATH, set by export.sh) when the tests run from another
    virtual environment, which lacks ESP-IDF's Python packages."""
    env = os.environ.get("IDF_PYTHON_ENV_PATH")
    python = Path(env) / "bin/python" if env else None
    if python is not None and python.is_file():
        return [str(python), str(Path(os.environ["IDF_PATH"]) / "tools/idf.py")]
    found = shutil.which("idf.py")
    return [found] if found else []


@dataclass
class Build:
    target: str
    project: Path
    build: Path
    log: str

    @property
    def elf(self) -> Path:
        return self.build / "espnn_runner.elf"

    def sdkconfig(self) -> dict:
        import json

        return json.loads((self.build / "config/sdkconfig.json").read_text())


def build(workdir: Path, target: str, defaults: list[str] = (), defines: dict[str, str] | None = None,
          timeout: float = 3600) -> Build:
    """`idf.py set-target <target> build` of a copy of the project in
    `workdir`; extra sdkconfig defaults lines and -D cache variables on top of
    the project's own. Raises AssertionError with the log tail on failure."""
    project = workdir / "project"
    if project.exists():
        shutil.rmtree(project)
    project.mkdir(parents=True)
    for name in PROJECT_FILES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, project / name, ignore=shutil.ignore_patterns("build", "build-*", "managed_components",
                                                                              "dependencies.lock", "__pycache__"))
        else:
            shutil.copy2(src, project / name)
    for f in REPO.glob("sdkconfig.defaults*"):
        shutil.copy2(f, project / f.name)
    # ESP-IDF also reads <file>.<target> after each file listed here
    # (sdkconfig.defaults.esp32s3, ...).
    sdk_defaults = [str(project / "sdkconfig.defaults")]
    if os.environ.get("ESPNN_IDF_EXTRA_DEFAULTS"):
        sdk_defaults.append(os.environ["ESPNN_IDF_EXTRA_DEFAULTS"])
    if defaults:
        extra = workdir / "test.defaults"
        extra.write_text("".join(line + "\n" for line in defaults))
        sdk_defaults.append(str(extra))
    args = [*idf_py(), "-C", str(project), "-B", str(project / "build")]
    if target == "linux":
        args.append("--preview")
    defines = dict(defines or {})
    defines["SDKCONFIG_DEFAULTS"] = ";".join(sdk_defaults)
    espnn = os.environ.get("ESPNN_DIR")
    if espnn:
        extra_dir = workdir / "extra_components"
        extra_dir.mkdir(exist_ok=True)
        link = extra_dir / "esp-nn"
        if not link.exists():
            link.symlink_to(Path(espnn).resolve())
        defines["EXTRA_COMPONENT_DIRS"] = str(extra_dir)
    args += [f"-D{k}={v}" for k, v in defines.items()]
    args += ["set-target", target, "build"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    log = r.stdout + r.stderr
    assert r.returncode == 0, f"{' '.join(args)} failed:\n{log[-6000:]}"
    return Build(target, project, project / "build", log)


def pte_mode(executorch: Path) -> tuple[list[str], dict[str, str]]:
    """The sdkconfig lines (sdkconfig.defaults.pte's) and -D variables of the
    runner's .pte mode against an ExecuTorch build of
    scripts/build-executorch-esp.sh: `build`'s defaults and defines. A
    caller's own lines go after these (a later line wins)."""
    lines = [line for line in (REPO / "sdkconfig.defaults.pte").read_text().splitlines()
             if line.startswith("CONFIG_")]
    return lines, {"ESPNN_EXECUTORCH_DIR": str(executorch)}


def warnings_in_our_sources(log: str) -> list[str]:
    """Compiler warnings that point into this repository's sources (ESP-IDF's
    and ESP-NN's own are not ours to fix)."""
    ours = ("components/espnn_runtime/", "components/espnn_test_runner/", "main/")
    return [line for line in log.splitlines() if "warning:" in line and any(o in line for o in ours)]


def executorch_build(target: str, ops: list[str] | None = None) -> tuple[Path | None, str]:
    """ExecuTorch cross-built for `target`, or None and why not.

    ESPNN_EXECUTORCH_BUILDS/<target> (a build of scripts/build-executorch-esp.sh
    the user made) wins; else, with ESPNN_EXECUTORCH_SRC (the device tool
    chain's executorch stage) and the portable operators the programs need
    (`ops`, e.g. ["aten::sin.out"]), a selective build of exactly those is
    made once and kept under ~/.cache/espnn-executorch."""
    root = os.environ.get("ESPNN_EXECUTORCH_BUILDS")
    if root:
        out = Path(root) / target
        if not (out / "lib/cmake/ExecuTorch").is_dir():
            return None, f"no ExecuTorch build for {target} at {out} (scripts/build-executorch-esp.sh --target {target})"
        return out, ""
    src = os.environ.get("ESPNN_EXECUTORCH_SRC")
    if not src or ops is None:
        return None, ("neither ESPNN_EXECUTORCH_BUILDS (a directory with <target>/ builds of "
                      "scripts/build-executorch-esp.sh) nor ESPNN_EXECUTORCH_SRC (tools/device-toolchain) is set; "
                      "docs/firmware.md")
    import hashlib

    ops = sorted(set(ops))
    key = hashlib.sha256(("\n".join([target, src, *ops])).encode()).hexdigest()[:16]
    out = Path.home() / ".cache/espnn-executorch" / f"{target}-{key}"
    if not (out / "lib/cmake/ExecuTorch").is_dir():
        cmd = ["bash", str(REPO / "scripts/build-executorch-esp.sh"), "--target", target, "--executorch-src", src,
               "--ops", ",".join(ops), "--out", str(out), "--force"]
        # The build's code generators need this Python's torch, whatever PATH says.
        r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHON": sys.executable})
        assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return out, ""


def program_operators(pte: bytes) -> set[str]:
    """The operators a .pte's methods call that ExecuTorch's kernels provide
    (ExecuTorch's own reader), as build-executorch-esp.sh --ops wants them:
    'aten::cumsum.out'. The operator-library ops (espnn::*) are left out: the
    component registers their kernels itself (CONFIG_ESPNN_EXECUTORCH_OPLIB)."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    program = deserialize_pte_binary(pte).program
    return {f"{op.name}.{op.overload}" if op.overload else op.name
            for plan in program.execution_plan for op in plan.operators if not op.name.startswith("espnn::")}


QEMU_ESP = REPO / "tools/qemu-esp/qemu-esp"


def qemu_problem(target: str) -> str | None:
    """Why Espressif's QEMU cannot run `target` here, or None. Debian's
    qemu-system-xtensa has no esp32/esp32s3 machine: ESPNN_QEMU_ESP must name
    Espressif's (docs/firmware.md says how it was built)."""
    qemu = os.environ.get("ESPNN_QEMU_ESP")
    if not qemu:
        return "ESPNN_QEMU_ESP is not set (Espressif's qemu-system-xtensa with esp32/esp32s3 machines)"
    if not Path(qemu).is_file():
        return f"ESPNN_QEMU_ESP={qemu} does not exist"
    r = subprocess.run([qemu, "-machine", "help"], capture_output=True, text=True)
    if not re.search(rf"^{target}\s", r.stdout, re.M):
        return f"{qemu} has no '{target}' machine (not Espressif's QEMU?)"
    return None


def run_on_qemu(build: Build, bundle: Path | None, *, icount: Path | None = None, psram_mb: int = 0,
                timeout: float = 1800) -> subprocess.CompletedProcess:
    """tools/qemu-esp/qemu-esp run: the console text up to ESPNN_END."""
    # --deterministic: a busy host once made the guest reset silently (a
    # watchdog on host-paced virtual time); with -icount it cannot.
    cmd = [sys.executable, str(QEMU_ESP), "run", "--qemu", os.environ["ESPNN_QEMU_ESP"], "--build", str(build.build),
           "--timeout", str(timeout), "--deterministic"]
    if bundle is not None:
        cmd += ["--bundle", str(bundle)]
    if icount is not None:
        cmd += ["--icount", str(icount)]
    if psram_mb:
        cmd += ["--psram-mb", str(psram_mb)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 120)
