"""Builds the native ExecuTorch delegate checks of host/tools/ (CMake option
ESPNN_BUILD_ET_CHECKS) for the tests in this directory.

They link libexecutorch.so and the CPU kernel libraries of the installed
executorch wheel; without the wheel (or cmake / a compiler) the tests are
skipped with the reason.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from support import toolchain

REPO = Path(__file__).resolve().parents[2]


def executorch_root() -> tuple[Path | None, str]:
    """(package directory of the executorch wheel, reason if unusable)."""
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        return None, "the executorch wheel is not installed"
    root = Path(list(spec.submodule_search_locations)[0])
    if not (root / "lib" / "libexecutorch.so").exists() or not (root / "include" / "executorch").is_dir():
        return None, f"{root} has no lib/libexecutorch.so and include/executorch"
    return root, ""


def build(build_dir: Path, targets: list[str], *, cc: str | None = None, cxx: str | None = None,
          flags: str = "-O1 -g", link_flags: str = "") -> str | None:
    """Configures and builds `targets`; returns None, or why it cannot (skip)."""
    root, why = executorch_root()
    if root is None:
        return why
    # Skips (fails under ESPNN_REQUIRE_TOOLCHAIN=1) without cmake and the compilers.
    toolchain.require("cmake", cc or "cc", cxx or cc or "c++")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    env = {k: v for k, v in os.environ.items() if k != "ESPNN_DIR"}  # the stand-in kernels
    if cc:
        env["CC"], env["CXX"] = cc, cxx or cc
    cfg = ["cmake", "-S", str(REPO / "host"), "-B", str(build_dir), *gen, "-DCMAKE_BUILD_TYPE=None",
           "-DESPNN_BUILD_PYTHON=OFF", "-DESPNN_BUILD_ET_CHECKS=ON", f"-DESPNN_EXECUTORCH_ROOT={root}",
           f"-DPython_EXECUTABLE={sys.executable}", f"-DCMAKE_C_FLAGS={flags}", f"-DCMAKE_CXX_FLAGS={flags}",
           f"-DCMAKE_EXE_LINKER_FLAGS={link_flags}"]
    for cmd in (cfg, ["cmake", "--build", str(build_dir), "--target", *targets, "-j", "2"]):
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            raise AssertionError(f"{' '.join(cmd[:4])} ... failed:\n{(r.stdout + r.stderr)[-4000:]}")
    return None


def write_programs(directory: Path, builders) -> dict[str, dict]:
    """Lowers each et_programs builder; writes NAME.pte and NAME_dI.xts3."""
    out = {}
    for make in builders:
        p = make()
        pte = directory / f"{p.name}.pte"
        pte.write_bytes(p.pte)
        payloads = []
        for i, blob in enumerate(p.payloads):
            f = directory / f"{p.name}_d{i}.xts3"
            f.write_bytes(blob)
            payloads.append(f)
        out[p.name] = {"pte": pte, "payloads": payloads}
    return out
