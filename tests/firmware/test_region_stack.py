"""The stack a fused region needs, measured at the format's limits.

docs/performance.md ("Fused regions: memory and stack") states how many
bytes of stack a BAND_LOOP takes beyond its ops' own: EvalBandLoop's band
state (sized by kMaxRegionTensors, whatever the region) and the frame that
runs one op on a band. Here a region of kMaxRegionOps ops and
kMaxRegionTensors tensors runs fused and layer by layer in the firmware
shell's --stack-probe (tests/firmware/stdio_runner.cpp: the stack painted
below the caller, Invoke run, the deepest overwritten byte found) on the
host's -m32 build and on lx106 under QEMU; the difference must lie within
what the doc states for that target, and be large enough to show the probe
sees the band state at all.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from espnn_dev import band_graphs as bg
from support import toolchain
from executorch_espnn import _native
from executorch_espnn.memory import FusedRegion

from .conftest import REPO, build_host_runner

# The band state alone: need/next/have ranges and base pointers for
# kMaxRegionTensors tensors on a 32-bit target (8 + 8 + 8 + 4 bytes each).
BAND_STATE_FLOOR = 28 * 64


def _documented_bounds() -> dict[str, int]:
    text = (REPO / "docs/performance.md").read_text()
    return {target: int(n) for target, n in re.findall(r"^\| (-m32|lx106) \| at most (\d+) bytes \|", text, re.M)}


@pytest.fixture(scope="module")
def blobs(tmp_path_factory) -> dict[str, Path]:
    w, first, num = bg.region_at_limits()
    d = w.arena_graph().bands.describe(first, num)
    assert len(d["ops"]) == _native.LIMITS["max_region_ops"]
    assert len(d["tensors"]) == _native.LIMITS["max_region_tensors"]
    out = tmp_path_factory.mktemp("region_stack")
    paths = {"layer": out / "layer.xts3", "fused": out / "fused.xts3"}
    paths["layer"].write_bytes(w.to_bytes())
    paths["fused"].write_bytes(w.to_bytes(w.plan([FusedRegion(first, num, 1)])))
    assert _native.Program(paths["fused"].read_bytes()).persistent_bytes == d["persistent_bytes"]
    return paths


def _probe(run, blob: Path) -> tuple[int, int]:
    r = run("--stack-probe", str(blob))
    m = re.fullmatch(r"STACK invoke=(\d+) persistent=(\d+)\n", r.stdout)
    assert r.returncode == 0 and m, (r.returncode, r.stdout, r.stderr[-2000:])
    return int(m[1]), int(m[2])


def _check(target: str, run, blobs) -> None:
    layer, none = _probe(run, blobs["layer"])
    fused, persistent = _probe(run, blobs["fused"])
    assert none == 0 and persistent == _native.Program(blobs["fused"].read_bytes()).persistent_bytes
    bound = _documented_bounds()[target]
    assert BAND_STATE_FLOOR <= fused - layer <= bound, (target, layer, fused)


@pytest.fixture(scope="module")
def m32_runner(tmp_path_factory) -> Path:
    toolchain.require(*toolchain.cmake_build_tools())
    build = tmp_path_factory.mktemp("bundle_runner_m32")
    probe = build / "probe.cpp"
    probe.write_text("int main() { return 0; }\n")
    if shutil.which("g++") is None or subprocess.run(["g++", "-m32", str(probe), "-o", str(build / "probe")],
                                                     capture_output=True).returncode != 0:
        toolchain.skip_or_fail("g++ -m32 cannot link (install gcc-multilib g++-multilib)")
    return build_host_runner(build, "-m32")


def test_docs_state_the_stack_of_a_region_for_both_targets():
    assert set(_documented_bounds()) == {"-m32", "lx106"}


def test_region_stack_at_the_limits_on_m32(m32_runner, blobs):
    _check("-m32", lambda *a: subprocess.run([str(m32_runner), *a], capture_output=True, text=True), blobs)


def test_region_stack_at_the_limits_on_lx106(xtensa, blobs):
    _check("lx106", xtensa.run, blobs)
