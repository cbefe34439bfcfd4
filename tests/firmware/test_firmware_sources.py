"""What of the device code is compiled where, and symbol hygiene.

Every device source file must be compiled by the host build and by the Xtensa
build, except the thin ESP-IDF glue that docs/firmware.md lists. The
component's library must define no ExecuTorch PAL symbol and no C symbol
outside the espnn_pal_ prefix, so it cannot clash with another runner's PAL."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from . import hello_model
from .conftest import REPO

DEVICE_DIRS = ["components/espnn_runtime/src", "components/espnn_runtime/examples", "main"]
# The ExecuTorch BackendInterface glue needs ExecuTorch's headers: on the host
# the pip build compiles it into executorch_espnn._et_backend (tests/runtime
# runs it through executorch.runtime); the tools-only and Xtensa builds here
# have no ExecuTorch, and the device build gets it with the cross-built
# ExecuTorch (docs/runtime.md).
EXECUTORCH_GLUE_DIR = REPO / "components/espnn_runtime/src/executorch"


def device_sources() -> set[str]:
    out = set()
    for d in DEVICE_DIRS:
        for ext in ("*.c", "*.cpp"):
            out |= {str(p.relative_to(REPO)) for p in (REPO / d).rglob(ext)
                    if EXECUTORCH_GLUE_DIR not in p.parents}
    return out


def documented_glue() -> set[str]:
    text = (REPO / "docs/firmware.md").read_text()
    section = text.split("<!-- esp-idf-glue-begin -->")[1].split("<!-- esp-idf-glue-end -->")[0]
    return set(re.findall(r"^- `([^`]+)`", section, re.M))


def host_compiled(runner) -> set[str]:
    commands = json.loads((runner.parent / "compile_commands.json").read_text())
    files = set()
    for c in commands:
        p = (Path(c["directory"]) / c["file"]).resolve()
        if REPO in p.parents:
            files.add(str(p.relative_to(REPO)))
    return files


def test_glue_list_names_real_files():
    glue = documented_glue()
    assert glue == {"components/espnn_runtime/src/platform_esp_idf.cpp", "main/main.cpp"}
    assert glue <= device_sources()


def test_every_device_source_but_the_glue_is_built_on_the_host(host_runner):
    missing = device_sources() - documented_glue() - host_compiled(host_runner)
    assert not missing, f"device sources the host build does not compile: {sorted(missing)}"


def test_every_device_source_but_the_glue_is_built_for_xtensa(xtensa):
    built = {str(p.relative_to(REPO)) for p in xtensa.sources}
    missing = device_sources() - documented_glue() - built
    assert not missing, f"device sources the Xtensa build does not compile: {sorted(missing)}"
    assert not (documented_glue() & built)


def test_library_defines_no_foreign_c_symbols(host_runner):
    """libespnn_runtime.a (what an application links): every defined C
    symbol is espnn_pal_*; et_pal_* only come from platform_et_pal.cpp,
    which the component compiles only with CONFIG_ESPNN_PAL_EXECUTORCH."""
    if shutil.which("nm") is None:
        pytest.skip("nm not installed")
    lib = host_runner.parent / "espnn_runtime/libespnn_runtime.a"
    out = subprocess.run(["nm", "-g", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    # (_Z: C++ names in namespace espnn; __: sanitizer/compiler-generated)
    c_symbols = {ln.split()[-1] for ln in out.splitlines()
                 if re.match(r"^[0-9a-f]+ [TDBR] ", ln) and not ln.split()[-1].startswith(("_Z", "__"))}
    assert c_symbols, out[:2000]
    assert all(s.startswith("espnn_pal_") for s in c_symbols), sorted(c_symbols)
    assert "et_pal" not in out
    pal_obj = next(host_runner.parent.rglob("platform_et_pal.cpp.o"))
    pal = subprocess.run(["nm", "-g", "--defined-only", str(pal_obj)], capture_output=True, text=True).stdout
    assert {ln.split()[-1] for ln in pal.splitlines() if " T " in ln} == {
        "et_pal_init", "et_pal_abort", "et_pal_current_ticks", "et_pal_ticks_to_ns_multiplier",
        "et_pal_emit_log_message", "et_pal_allocate", "et_pal_free"}


def test_hello_example_model_header_is_current():
    assert hello_model.HEADER.read_text() == hello_model.header_text(), (
        "regenerate with: PYTHONPATH=tests python -m firmware.hello_model")


def test_esp_idf_glue_uses_only_portable_logic():
    """The glue stays thin: no bundle parsing, verification or formatting of
    its own (those are tested elsewhere)."""
    main = (REPO / "main/main.cpp").read_text()
    assert "RunBundle(" in main and "PeekBundleSize(" in main
    assert "RunSuite(" in main and "PeekSuiteSize(" in main
    for forbidden in ("memcmp", "LoadU32", "ESPNN_RESULT", "Crc32", "executorch::", "Program::"):
        assert forbidden not in main
    esp = (REPO / "components/espnn_runtime/src/platform_esp_idf.cpp").read_text()
    assert "AllocationOrder(" in esp and len(esp.splitlines()) < 150
