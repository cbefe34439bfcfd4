"""The component's Kconfig and main/Kconfig.projbuild, resolved with ESP-IDF's
own Kconfig tools (esp-idf-kconfig: kconfcheck, kconfgen) against the
project's sdkconfig.defaults files. ESP-IDF's Kconfig tree is not available
here, so the one IDF symbol these menus depend on (SPIRAM) is declared by a
stub; unknown IDF keys in the defaults files are reported and ignored by
kconfgen, as in a build. Skipped when esp-idf-kconfig is not installed
(pip install esp-idf-kconfig; .ci/run does); the check that every
CONFIG_ESPNN_* name used in code is declared runs regardless."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

needs_kconfgen = pytest.mark.skipif(importlib.util.find_spec("kconfgen") is None,
                                reason="esp-idf-kconfig is not installed (pip install esp-idf-kconfig)")

COMPONENT_KCONFIG = REPO / "components/espnn_runtime/Kconfig"
MAIN_KCONFIG = REPO / "main/Kconfig.projbuild"


def resolve(tmp: Path, *defaults: Path, spiram_default: str = "n") -> dict[str, str]:
    stub = tmp / "Kconfig"
    stub.write_text(f'mainmenu "stub"\nconfig SPIRAM\n    bool "PSRAM"\n    default {spiram_default}\n'
                    f'source "{COMPONENT_KCONFIG}"\nsource "{MAIN_KCONFIG}"\n')
    header = tmp / "sdkconfig.h"
    args = [sys.executable, "-m", "kconfgen", "--kconfig", str(stub), "--output", "header", str(header)]
    for d in defaults:
        args += ["--defaults", str(d)]
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return dict(re.findall(r"^#define CONFIG_(\w+) (.*)$", header.read_text(), re.M))


@needs_kconfgen
def test_kconfig_style():
    r = subprocess.run([sys.executable, "-m", "kconfcheck", str(COMPONENT_KCONFIG), str(MAIN_KCONFIG)],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0 and "2 files have been successfully checked" in r.stdout, r.stdout + r.stderr


@needs_kconfgen
def test_esp32s3_defaults(tmp_path):
    c = resolve(tmp_path, REPO / "sdkconfig.defaults", REPO / "sdkconfig.defaults.esp32s3")
    assert c["SPIRAM"] == "1"
    # Internal RAM first, PSRAM for what does not fit: no fixed pool.
    assert c["ESPNN_MEMORY_INTERNAL_FIRST"] == "1" and c["ESPNN_WEIGHTS_IN_PLACE"] == "1"
    assert "ESPNN_MEMORY_RUNTIME_ALLOCATOR" not in c and "ESPNN_RUNNER_POOL_KB" not in c
    assert c["ESPNN_LOG_LEVEL"] == "3" and "ESPNN_PAL_EXECUTORCH" not in c
    assert c["ESPNN_RUNNER_BUNDLE_PARTITION"] == "1" and c["ESPNN_RUNNER_PARTITION_LABEL"] == '"bundle"'
    assert c["ESPNN_RUNNER_DEFAULT_RUNS"] == "20"


@needs_kconfgen
def test_esp32_defaults_use_internal_ram_only(tmp_path):
    c = resolve(tmp_path, REPO / "sdkconfig.defaults", REPO / "sdkconfig.defaults.esp32", spiram_default="y")
    assert "SPIRAM" not in c  # sdkconfig.defaults.esp32 turns it off
    assert c["ESPNN_RUNNER_POOL_KB"] == "96" and "ESPNN_RUNNER_POOL_PSRAM" not in c


@needs_kconfgen
def test_psram_choices_need_spiram(tmp_path):
    """Without PSRAM the PSRAM options cannot be selected: a defaults file
    asking for them falls back to the choices' defaults."""
    d = tmp_path / "defaults"
    d.write_text("CONFIG_ESPNN_MEMORY_PSRAM_FIRST=y\nCONFIG_ESPNN_WEIGHTS_COPY_PSRAM=y\n"
                 "CONFIG_ESPNN_RUNNER_POOL_PSRAM=y\n")
    c = resolve(tmp_path, d)
    assert c["ESPNN_MEMORY_RUNTIME_ALLOCATOR"] == "1" and c["ESPNN_WEIGHTS_IN_PLACE"] == "1"
    assert "ESPNN_MEMORY_PSRAM_FIRST" not in c and "ESPNN_RUNNER_POOL_PSRAM" not in c
    d.write_text("CONFIG_SPIRAM=y\n" + d.read_text())
    c = resolve(tmp_path, d)
    assert c["ESPNN_MEMORY_PSRAM_FIRST"] == "1" and c["ESPNN_WEIGHTS_COPY_PSRAM"] == "1"
    assert "ESPNN_RUNNER_POOL_KB" not in c  # the pool exists only for the runtime-allocator source


@needs_kconfgen
def test_log_level_and_pal_options(tmp_path):
    d = tmp_path / "defaults"
    d.write_text("CONFIG_ESPNN_LOG_LEVEL_DEBUG=y\nCONFIG_ESPNN_PAL_EXECUTORCH=y\n"
                 "CONFIG_ESPNN_RUNNER_BUNDLE_EMBEDDED=y\n")
    c = resolve(tmp_path, d)
    assert c["ESPNN_LOG_LEVEL"] == "4" and c["ESPNN_PAL_EXECUTORCH"] == "1"
    assert c["ESPNN_RUNNER_BUNDLE_EMBEDDED"] == "1" and "ESPNN_RUNNER_PARTITION_LABEL" not in c


def test_every_config_symbol_used_in_code_is_defined():
    """CONFIG_ESPNN_* names in the sources must exist in a Kconfig file (a
    typo would silently select the #else branch)."""
    defined = set(re.findall(r"^\s*config (ESPNN_\w+)", COMPONENT_KCONFIG.read_text() + MAIN_KCONFIG.read_text(),
                             re.M))
    used = set()
    for p in [*(REPO / "components/espnn_runtime").rglob("*.cpp"), *(REPO / "components/espnn_runtime").rglob("*.h"),
              *(REPO / "main").glob("*.cpp"), REPO / "main/CMakeLists.txt",
              REPO / "components/espnn_runtime/CMakeLists.txt",
              *REPO.glob("sdkconfig.defaults*")]:
        # (a trailing "_" is a prefix in a comment, e.g. CONFIG_ESPNN_MEMORY_*)
        used |= {n for n in re.findall(r"CONFIG_(ESPNN_\w+)", p.read_text()) if not n.endswith("_")}
    assert used and used <= defined, sorted(used - defined)


@needs_kconfgen
def test_bundle_mode_is_the_default_and_needs_no_executorch(tmp_path):
    c = resolve(tmp_path, REPO / "sdkconfig.defaults", REPO / "sdkconfig.defaults.esp32s3")
    assert c["ESPNN_RUNNER_MODE_BUNDLE"] == "1" and "ESPNN_RUNNER_MODE_PTE" not in c
    assert "ESPNN_EXECUTORCH_BACKEND" not in c and "ESPNN_RUNNER_METHOD_POOL_KB" not in c


@needs_kconfgen
@pytest.mark.parametrize("target, spiram, pool_kb", [("esp32s3", "n", "192"), ("esp32", "y", "64")])
def test_pte_mode_defaults(tmp_path, target, spiram, pool_kb):
    """ESP-IDF's order for SDKCONFIG_DEFAULTS="sdkconfig.defaults;sdkconfig.defaults.pte":
    each file, then its target variant (docs/firmware.md)."""
    files = [REPO / "sdkconfig.defaults", REPO / f"sdkconfig.defaults.{target}", REPO / "sdkconfig.defaults.pte"]
    files += [f for f in [REPO / f"sdkconfig.defaults.pte.{target}"] if f.exists()]
    c = resolve(tmp_path, *files, spiram_default=spiram)
    assert c["ESPNN_RUNNER_MODE_PTE"] == "1" and c["ESPNN_EXECUTORCH_BACKEND"] == "1"
    assert c["ESPNN_PAL_EXECUTORCH"] == "1"
    assert c["ESPNN_RUNNER_METHOD_POOL_KB"] == pool_kb and c["ESPNN_RUNNER_TEMP_POOL_KB"] == "16"
    assert "ESPNN_RUNNER_POOL_KB" not in c  # the bundle-mode pool does not exist in .pte mode


@needs_kconfgen
def test_pte_mode_selects_the_delegate(tmp_path):
    d = tmp_path / "defaults"
    d.write_text("CONFIG_ESPNN_RUNNER_MODE_PTE=y\nCONFIG_ESPNN_EXECUTORCH_BACKEND=n\n")
    c = resolve(tmp_path, d)
    assert c["ESPNN_EXECUTORCH_BACKEND"] == "1"  # `select` wins over the defaults file
