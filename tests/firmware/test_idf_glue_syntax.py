"""The thin ESP-IDF glue (main/main.cpp, src/platform_esp_idf.cpp) is built
by ESP-IDF only (tests/idf does that where ESP-IDF is installed). This
compiles it everywhere (to an object file, -Wall -Wextra -Werror) against
stand-in declarations of the few ESP-IDF APIs it calls (tests/firmware/idf_stubs, written from ESP-IDF
v5's documented signatures), in every Kconfig variant the code branches on,
so a C++ mistake in a branch is caught. It is not an ESP-IDF build: a wrong
assumption about ESP-IDF itself would pass here."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from support import toolchain

from .conftest import REPO

STUBS = REPO / "tests/firmware/idf_stubs"
COMPONENT = REPO / "components/espnn_runtime"
TEST_RUNNER = REPO / "components/espnn_test_runner"

BASE = {"IDF_TARGET": '"esp32s3"', "ESP_DEFAULT_CPU_FREQ_MHZ": "240", "ESPNN_LOG_LEVEL": "3",
        "ESPNN_RUNNER_PARTITION_LABEL": '"bundle"', "ESPNN_RUNNER_DEFAULT_RUNS": "20"}
MAIN_VARIANTS = {
    "bundle-partition-pool": {"ESPNN_RUNNER_MODE_BUNDLE": "1", "ESPNN_RUNNER_BUNDLE_PARTITION": "1",
                              "ESPNN_MEMORY_RUNTIME_ALLOCATOR": "1", "ESPNN_WEIGHTS_IN_PLACE": "1",
                              "ESPNN_RUNNER_POOL_KB": "128"},
    "bundle-embedded-psram": {"ESPNN_RUNNER_MODE_BUNDLE": "1", "ESPNN_RUNNER_BUNDLE_EMBEDDED": "1",
                              "SPIRAM": "1", "ESPNN_MEMORY_RUNTIME_ALLOCATOR": "1",
                              "ESPNN_WEIGHTS_COPY_PSRAM": "1", "ESPNN_RUNNER_POOL_KB": "192",
                              "ESPNN_RUNNER_POOL_PSRAM": "1"},
    "bundle-heap-caps": {"ESPNN_RUNNER_MODE_BUNDLE": "1", "ESPNN_RUNNER_BUNDLE_PARTITION": "1",
                         "ESPNN_MEMORY_PSRAM_FIRST": "1", "SPIRAM": "1", "ESPNN_WEIGHTS_COPY_INTERNAL": "1"},
    "pte-partition": {"ESPNN_RUNNER_MODE_PTE": "1", "ESPNN_EXECUTORCH_BACKEND": "1",
                      "ESPNN_RUNNER_BUNDLE_PARTITION": "1", "ESPNN_MEMORY_RUNTIME_ALLOCATOR": "1",
                      "ESPNN_RUNNER_METHOD_POOL_KB": "192", "ESPNN_RUNNER_TEMP_POOL_KB": "16"},
    # ESP-IDF's linux target: the app as a Linux process (tests/idf builds it).
    "bundle-embedded-linux": {"IDF_TARGET_LINUX": "1", "IDF_TARGET": '"linux"',
                              "ESPNN_RUNNER_MODE_BUNDLE": "1", "ESPNN_RUNNER_BUNDLE_EMBEDDED": "1",
                              "ESPNN_MEMORY_RUNTIME_ALLOCATOR": "1", "ESPNN_WEIGHTS_IN_PLACE": "1",
                              "ESPNN_RUNNER_POOL_KB": "128"},
    "pte-embedded-linux": {"IDF_TARGET_LINUX": "1", "IDF_TARGET": '"linux"', "ESPNN_RUNNER_MODE_PTE": "1",
                           "ESPNN_EXECUTORCH_BACKEND": "1", "ESPNN_RUNNER_BUNDLE_EMBEDDED": "1",
                           "ESPNN_MEMORY_RUNTIME_ALLOCATOR": "1", "ESPNN_RUNNER_METHOD_POOL_KB": "192",
                           "ESPNN_RUNNER_TEMP_POOL_KB": "16"},
    "pte-embedded-psram": {"ESPNN_RUNNER_MODE_PTE": "1", "ESPNN_EXECUTORCH_BACKEND": "1",
                           "ESPNN_RUNNER_BUNDLE_EMBEDDED": "1", "SPIRAM": "1",
                           "ESPNN_MEMORY_RUNTIME_ALLOCATOR": "1", "ESPNN_RUNNER_METHOD_POOL_KB": "192",
                           "ESPNN_RUNNER_TEMP_POOL_KB": "16", "ESPNN_RUNNER_PTE_POOLS_PSRAM": "1"},
}
PAL_VARIANTS = {"no-psram": {}, "psram": {"SPIRAM": "1"}, "log-debug": {"ESPNN_LOG_LEVEL": "4"},
                "linux": {"IDF_TARGET_LINUX": "1", "IDF_TARGET": '"linux"'}}
# What ESP-IDF 5.5's linux target lacks: esp_cpu.h (RISC-V/Xtensa only), the
# clock tree, and esp_timer's implementation (its header exists, nothing
# links). The linux variants compile without those stand-ins, so glue that
# reaches for them on linux fails here as it failed in a real linux build.
NOT_ON_LINUX = {"esp_cpu.h", "esp_clk_tree.h", "esp_timer.h"}


def stubs_for(tmp_path, config: dict[str, str]) -> Path:
    if "IDF_TARGET_LINUX" not in config:
        return STUBS
    linux = tmp_path / "linux_stubs"
    shutil.copytree(STUBS, linux, ignore=lambda _dir, names: [n for n in names if n in NOT_ON_LINUX])
    return linux


def syntax_check(tmp_path, source, config: dict[str, str], includes) -> subprocess.CompletedProcess:
    toolchain.require("c++")
    cxx = next(shutil.which(c) for c in toolchain.CXX_COMPILERS if shutil.which(c))
    config = {**BASE, **config}
    if "IDF_TARGET_LINUX" in config:
        config.pop("ESP_DEFAULT_CPU_FREQ_MHZ")  # no CPU clock setting on linux
    (tmp_path / "sdkconfig.h").write_text("".join(f"#define CONFIG_{k} {v}\n" for k, v in config.items()))
    # Compiled to an object, not -fsyntax-only: unused-function warnings (as
    # ESP-IDF reported for main.cpp) come after parsing.
    args = [cxx, "-std=gnu++17", "-c", "-o", str(tmp_path / "glue.o"), "-Wall", "-Wextra", "-Werror",
            "-fno-exceptions", "-fno-rtti",
            "-DESP_PLATFORM=1", f"-I{tmp_path}", f"-I{stubs_for(tmp_path, config)}",
            *(f"-I{i}" for i in includes), str(source)]
    return subprocess.run(args, capture_output=True, text=True)


@pytest.mark.parametrize("variant", sorted(MAIN_VARIANTS))
def test_main_glue_compiles_in_every_mode(tmp_path, variant):
    r = syntax_check(tmp_path, REPO / "main/main.cpp", MAIN_VARIANTS[variant], [COMPONENT / "include", TEST_RUNNER / "include", REPO / "main"])
    assert r.returncode == 0, r.stderr[-4000:]


@pytest.mark.parametrize("variant", sorted(PAL_VARIANTS))
def test_platform_glue_compiles(tmp_path, variant):
    r = syntax_check(tmp_path, COMPONENT / "src/platform_esp_idf.cpp", PAL_VARIANTS[variant],
                     [COMPONENT / "include", COMPONENT / "src"])
    assert r.returncode == 0, r.stderr[-4000:]


def test_the_check_can_fail(tmp_path):
    """Without the mode's symbols the glue must not compile (the stubs do not
    hide a real error)."""
    bad = tmp_path / "bad.cpp"
    bad.write_text((REPO / "main/main.cpp").read_text().replace("espnn::pte::RunSuite(", "espnn::pte::RunSuiteX("))
    r = syntax_check(tmp_path, bad, MAIN_VARIANTS["pte-partition"], [COMPONENT / "include", TEST_RUNNER / "include", REPO / "main"])
    assert r.returncode != 0 and "RunSuiteX" in r.stderr


def test_linux_variant_has_no_chip_headers(tmp_path):
    """The linux stand-ins really lack the chip's headers: the esp32s3 PAL
    (esp_cpu.h, esp_clk_tree.h) does not compile against them."""
    bad = tmp_path / "bad.cpp"
    bad.write_text((COMPONENT / "src/platform_esp_idf.cpp").read_text().replace("#if CONFIG_IDF_TARGET_LINUX", "#if 0"))
    r = syntax_check(tmp_path, bad, PAL_VARIANTS["linux"], [COMPONENT / "include", COMPONENT / "src"])
    assert r.returncode != 0 and "esp_cpu.h" in r.stderr
