"""What of the device code is compiled where, and symbol hygiene.

Every .c/.cpp file under components/ and main/ must be compiled by a host
build or the Xtensa build here, except the thin ESP-IDF glue that
docs/firmware.md lists (only ESP-IDF compiles it: tests/idf, where ESP-IDF is set up).
More precisely:
- every source but the glue is compiled by a host build: the tools build
  (bundle_runner, host_runner fixture) or the .pte runner build against the
  executorch wheel (tests/firmware/pte_host, pte_runner fixture);
- every source that needs neither ExecuTorch's headers nor the host's own
  PAL is also cross-compiled for Xtensa lx106 (xtensa fixture). ExecuTorch
  is not cross-built here, so the files that include <executorch/...> (the
  delegate and main/'s .pte runner) are host-only until an ESP-IDF build.
The component's library must define no ExecuTorch PAL symbol and no C symbol
outside the espnn_pal_ prefix, so it cannot clash with another runner's PAL."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from support import toolchain

from . import hello_model
from .conftest import REPO

DEVICE_DIRS = ["components", "main"]
# The host's espnn_pal_* for the Python extension's delegate build; the
# Xtensa shell brings its own PAL (tests/firmware/stdio_pal.cpp).
HOST_PAL = {"components/espnn_runtime/src/platform_host.cpp"}


def in_repo(paths) -> set[str]:
    """The repository-relative names of those of `paths` that lie inside the
    repository; the others (the real ESP-NN sources from $ESPNN_DIR, which
    are outside it) are not device sources of ours and are left out."""
    out = set()
    for p in paths:
        p = Path(p).resolve()
        if REPO in p.parents:
            out.add(str(p.relative_to(REPO)))
    return out


def device_sources() -> set[str]:
    out = set()
    for d in DEVICE_DIRS:
        for ext in ("*.c", "*.cpp"):
            out |= {s for s in in_repo((REPO / d).rglob(ext))
                    if not {"build", "managed_components"} & set(Path(s).parts)}
    return out


def executorch_sources() -> set[str]:
    """Device sources that need ExecuTorch's headers (platform_et_pal.cpp
    only uses them when present: __has_include)."""
    def needs(text: str) -> bool:
        return bool(re.search(r"#include\s*<executorch/", text)) and "__has_include(<executorch/" not in text

    return {s for s in device_sources() if needs((REPO / s).read_text())}


def documented_glue() -> set[str]:
    text = (REPO / "docs/firmware.md").read_text()
    section = text.split("<!-- esp-idf-glue-begin -->")[1].split("<!-- esp-idf-glue-end -->")[0]
    return set(re.findall(r"^- `([^`]+)`", section, re.M))


def host_compiled(executable: Path) -> set[str]:
    commands = json.loads((executable.parent / "compile_commands.json").read_text())
    return in_repo(Path(c["directory"]) / c["file"] for c in commands)


def test_glue_list_names_real_files():
    glue = documented_glue()
    assert glue == {"components/espnn_runtime/src/platform_esp_idf.cpp", "main/main.cpp"}
    assert glue <= device_sources()


def test_executorch_dependent_sources_are_the_expected_ones():
    """A new file that includes ExecuTorch must be added to a host build
    deliberately (it cannot go into the Xtensa build)."""
    assert executorch_sources() == {"components/espnn_runtime/src/executorch/espnn_backend.cpp",
                                    "components/espnn_runtime/src/executorch/espnn_oplib_kernels.cpp",
                                    "components/espnn_test_runner/src/pte_runner.cpp"}


def test_every_device_source_but_the_glue_is_built_on_the_host(host_runner, pte_runner):
    built = host_compiled(host_runner) | host_compiled(pte_runner)
    missing = device_sources() - documented_glue() - built
    assert not missing, f"device sources no host build compiles: {sorted(missing)}"
    assert not (documented_glue() & built)


def not_built_for_xtensa(sources) -> set[str]:
    """The portable device sources missing from an Xtensa build's source
    list (which may also hold files outside the repository: ESP-NN's)."""
    return device_sources() - documented_glue() - executorch_sources() - HOST_PAL - in_repo(sources)


def test_every_portable_device_source_is_built_for_xtensa(xtensa):
    missing = not_built_for_xtensa(xtensa.sources)
    assert not missing, f"device sources the Xtensa build does not compile: {sorted(missing)}"
    built = in_repo(xtensa.sources)
    assert not (documented_glue() & built)
    assert "components/espnn_test_runner/src/pte_suite.cpp" in built


def test_xtensa_source_check_takes_kernels_from_outside_the_repo(tmp_path, monkeypatch):
    """With $ESPNN_DIR the Xtensa build compiles ESP-NN's own sources, which
    lie outside the repository (this check once raised ValueError from
    Path.relative_to on them). They are not ours to account for; a portable
    device source missing from the build is still reported. Needs no
    cross-compiler: it checks the source list that build() would compile."""
    from espnn_dev import xtensa_build

    espnn = tmp_path / "esp-nn"
    kernel = espnn / "src/activation_functions/esp_nn_hard_swish_ansi.c"
    kernel.parent.mkdir(parents=True)
    kernel.write_text("/* stands for an ESP-NN source outside the repository */\n")
    assert REPO not in kernel.resolve().parents
    monkeypatch.setenv("ESPNN_DIR", str(espnn))
    sources, _, name = xtensa_build.build_inputs()
    assert kernel in sources and str(espnn) in name
    assert not_built_for_xtensa(sources) == set()
    dropped = REPO / "components/espnn_test_runner/src/pte_suite.cpp"
    assert dropped in sources
    assert not_built_for_xtensa([s for s in sources if s != dropped]) == {
        "components/espnn_test_runner/src/pte_suite.cpp"}


def test_library_defines_no_foreign_c_symbols(host_runner):
    """libespnn_runtime.a (what an application links): every defined C
    symbol is espnn_pal_*; et_pal_* only come from platform_et_pal.cpp,
    which the component compiles only with CONFIG_ESPNN_PAL_EXECUTORCH."""
    toolchain.require("nm")
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
