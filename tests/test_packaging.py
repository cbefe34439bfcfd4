"""Packaging: the version is defined once, the delegate uses the executorch
wheel's libexecutorch (never a copy), the wheel audit check, and the
cibuildwheel configuration (docs/releasing.md).

The tests marked `smoke` run from an installed wheel without a compiler
(scripts/wheel-smoke.sh); the others read the source tree.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import executorch_espnn

REPO = Path(__file__).resolve().parents[1]
AUDIT = REPO / ".github/scripts/check_wheel_audit.py"


def pyproject_version() -> str:
    text = (REPO / "pyproject.toml").read_text()
    project = re.search(r"^\[project\]\n(.*?)(?=^\[)", text, re.M | re.S).group(1)
    return re.search(r'^version = "([^"]+)"', project, re.M).group(1)


def manifest_version() -> str:
    text = (REPO / "components/espnn_runtime/idf_component.yml").read_text()
    return re.search(r'^version: "([^"]+)"', text, re.M).group(1)


@pytest.mark.smoke
def test_version_is_defined_once():
    """pyproject.toml's [project] version is the package's version (read from
    the installed metadata) and the component manifest's."""
    assert manifest_version() == pyproject_version()
    if executorch_espnn.__version__ == "0+unknown":
        pytest.skip("executorch_espnn is not installed (a source tree on PYTHONPATH has no metadata)")
    assert executorch_espnn.__version__ == pyproject_version() == importlib.metadata.version("executorch-espnn")


def test_version_without_installed_metadata(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert executorch_espnn._version() == "0+unknown"


def elf_dynamic(path: Path) -> dict[str, list[str]]:
    """NEEDED, RPATH and RUNPATH entries of a 64-bit little-endian ELF file
    (x86_64, aarch64), read without binutils (a wheel user may have none)."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, f"{path}: not a 64-bit LE ELF file"
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    # name, type, flags, addr, offset, size, link, info, addralign, entsize
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    dynamic = next(s for s in sections if s[1] == 6)  # SHT_DYNAMIC
    strtab_offset = sections[dynamic[6]][4]
    out: dict[str, list[str]] = {"NEEDED": [], "RPATH": [], "RUNPATH": []}
    for at in range(dynamic[4], dynamic[4] + dynamic[5], 16):
        tag, value = struct.unpack_from("<qQ", data, at)
        if tag == 0:
            break
        name = {1: "NEEDED", 15: "RPATH", 29: "RUNPATH"}.get(tag)
        if name:
            start = strtab_offset + value
            out[name].append(data[start:data.index(b"\0", start)].decode())
    return out


@pytest.mark.smoke
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads ELF files and /proc/self/maps (Linux)")
def test_delegate_loads_libexecutorch_of_the_executorch_wheel():
    """_et_backend needs libexecutorch.so and finds it only through its
    RUNPATH in the installed executorch wheel; our package ships no copy, and
    the library mapped in this process is the executorch wheel's."""
    import executorch

    module = executorch_espnn._et_backend
    assert module is not None, executorch_espnn.ET_BACKEND_ERROR
    if not (Path(executorch_espnn.__file__).parent.parent / "executorch").is_dir():
        pytest.skip("executorch_espnn is not installed beside executorch (a scripts/dev-build.sh tree, whose "
                    "build RUNPATH points at the executorch it was built against); this checks an installed wheel")
    dyn = elf_dynamic(Path(module.__file__))
    assert "libexecutorch.so" in dyn["NEEDED"]
    assert dyn["RUNPATH"] == ["$ORIGIN/../executorch/lib"] and dyn["RPATH"] == [], dyn
    package = Path(executorch_espnn.__file__).parent
    copies = [p for d in (package, package.parent / "executorch_espnn.libs") if d.is_dir()
              for p in d.rglob("libexecutorch*")]
    assert copies == []
    wheel_lib = (Path(list(executorch.__path__)[0]) / "lib/libexecutorch.so").resolve()
    mapped = {Path(line.split(None, 5)[5]).resolve() for line in Path("/proc/self/maps").read_text().splitlines()
              if line.rstrip().endswith("/libexecutorch.so")}
    assert mapped == {wheel_lib}


# -- the audit of a repaired wheel (scripts/wheel-check.sh) -----------------------
ET_LIB = "/venv/lib/python3.11/site-packages/executorch/lib/libexecutorch.so"


def report(**changes) -> dict:
    r = {"wheel": "executorch_espnn-0.1.0-cp311-cp311-manylinux_2_34_x86_64.whl",
         "sym_tag": "manylinux_2_34_x86_64", "overall_tag": "linux_x86_64",
         "external_libs": {"libexecutorch.so": ET_LIB},
         "policy_upgrades": {"manylinux_2_34_x86_64": {"libs_to_eliminate": ["libexecutorch.so"]},
                             "manylinux_2_28_x86_64": {"libs_to_eliminate": ["libexecutorch.so"]}}}
    r.update(changes)
    return r


def audit(tmp_path, r: dict, *args: str) -> subprocess.CompletedProcess:
    f = tmp_path / "audit.json"
    f.write_text(json.dumps(r))
    return subprocess.run([sys.executable, str(AUDIT), str(f), *args], capture_output=True, text=True)


def test_audit_accepts_libexecutorch_from_the_executorch_wheel(tmp_path):
    r = audit(tmp_path, report(), "--executorch", str(Path(ET_LIB).parents[1]))
    assert r.returncode == 0, r.stderr
    assert "libexecutorch.so from" in r.stdout


@pytest.mark.parametrize("changes, message", [
    ({"external_libs": {"libexecutorch.so": ET_LIB, "libfoo.so.1": "/usr/lib/libfoo.so.1"}},
     "external libraries besides libexecutorch.so: libfoo.so.1"),
    ({"external_libs": {}}, "is not an external library"),
    ({"external_libs": {"libexecutorch.so": "/opt/other/lib/libexecutorch.so"}}, "not to the executorch wheel"),
    ({"external_libs": {"libexecutorch.so": None}}, "did not find libexecutorch.so"),
    ({"sym_tag": "manylinux_2_39_x86_64"}, "not the wheel's tag"),
    ({"policy_upgrades": {"manylinux_2_34_x86_64": {"libs_to_eliminate": ["libexecutorch.so", "libgomp.so.1"]}}},
     "would need to bundle libgomp.so.1"),
])
def test_audit_refuses_anything_else(tmp_path, changes, message):
    r = audit(tmp_path, report(**changes))
    assert r.returncode == 1 and message in r.stderr, r.stderr


# -- cibuildwheel configuration -----------------------------------------------------
@pytest.fixture(scope="module")
def cibw() -> dict:
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["cibuildwheel"]


def test_wheels_are_built_where_executorch_has_wheels(cibw):
    """CPython 3.10-3.14 on manylinux_2_28 x86_64/aarch64 and macOS arm64:
    where executorch 1.5.1 and torch 2.13.0 publish wheels (Windows is not
    built: the host build was never ported there)."""
    assert cibw["build"] == [f"cp3{m}-*" for m in range(10, 15)]
    for pattern in ("*t-*", "*-musllinux_*", "*-win*", "*-macosx_x86_64", "*_i686"):
        assert pattern in cibw["skip"]
    assert cibw["linux"]["manylinux-x86_64-image"] == cibw["linux"]["manylinux-aarch64-image"] == "manylinux_2_28"
    assert cibw["macos"]["archs"] == ["arm64"]
    assert cibw["macos"]["environment"]["MACOSX_DEPLOYMENT_TARGET"] == "14.0"


def test_repair_never_bundles_libexecutorch(cibw):
    assert "--exclude libexecutorch.so" in cibw["linux"]["repair-wheel-command"]
    assert "--exclude libexecutorch.dylib" in cibw["macos"]["repair-wheel-command"]


def test_every_built_wheel_is_smoke_tested(cibw):
    assert cibw["test-extras"] == ["test"]
    assert cibw["test-command"] == "bash {project}/scripts/wheel-smoke.sh {project}"
    smoke = (REPO / "scripts/wheel-smoke.sh").read_text()
    assert "espnn compile" in smoke and "pytest -m smoke" in smoke
