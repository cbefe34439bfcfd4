"""ESP-IDF reads every component's CMakeLists.txt twice: once in CMake's
script mode (`cmake -P tools/cmake/scripts/component_get_requirements.cmake`,
with CMAKE_BUILD_EARLY_EXPANSION set and idf_component_register() a macro
that only records the requirements) and once in the real configure step.
Commands refused in script mode (file(GLOB ... CONFIGURE_DEPENDS),
add_library, target_*) made `idf.py` fail before it configured anything, on
every target. This replays the early expansion on the project's own
CMakeLists.txt files with a stand-in of ESP-IDF's macros, so it runs where
ESP-IDF is absent (tests/idf runs the real thing)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from support import toolchain

from .conftest import REPO

# The part of ESP-IDF's component_get_requirements.cmake that matters here:
# idf_component_register() records REQUIRES / PRIV_REQUIRES and returns from
# the included file, before any target command runs.
EXPANSION = r"""
set(ESP_PLATFORM 1)
set(IDF_TARGET "{target}")
set(CMAKE_BUILD_EARLY_EXPANSION 1)
macro(idf_build_get_property var prop)
  set(${{var}} "")
  if("${{prop}}" STREQUAL "IDF_TARGET")
    set(${{var}} "{target}")
  endif()
endmacro()
macro(idf_component_register)
  cmake_parse_arguments(_ "WHOLE_ARCHIVE" "KCONFIG;KCONFIG_PROJBUILD"
      "SRCS;SRC_DIRS;EXCLUDE_SRCS;INCLUDE_DIRS;PRIV_INCLUDE_DIRS;LDFRAGMENTS;REQUIRES;PRIV_REQUIRES;REQUIRED_IDF_TARGETS;EMBED_FILES;EMBED_TXTFILES"
      ${{ARGN}})
  message("REQUIRES=${{__REQUIRES}};PRIV_REQUIRES=${{__PRIV_REQUIRES}}")
  set(__registered 1)
  return()
endmacro()
function(expand dir)
  set(COMPONENT_DIR ${{dir}})
  include(${{dir}}/CMakeLists.txt)
endfunction()
expand("{component}")
"""


def expand(tmp_path, component, target="esp32s3"):
    toolchain.require("cmake")
    cmake = shutil.which("cmake")
    script = tmp_path / "expand.cmake"
    script.write_text(EXPANSION.format(target=target, component=component.as_posix()))
    return subprocess.run([cmake, "-P", str(script)], capture_output=True, text=True)


@pytest.mark.parametrize("target", ["esp32s3", "esp32", "linux"])
@pytest.mark.parametrize("component", ["components/espnn_runtime", "components/espnn_test_runner", "main"])
def test_component_cmakelists_survive_early_expansion(tmp_path, component, target):
    r = expand(tmp_path, REPO / component, target)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "PRIV_REQUIRES=" in r.stderr  # reached idf_component_register


def test_runtime_requirements_recorded(tmp_path):
    r = expand(tmp_path, REPO / "components/espnn_runtime")
    line = next(x for x in r.stderr.splitlines() if x.startswith("REQUIRES="))
    assert "PRIV_REQUIRES=esp_timer;esp_hw_support;heap;log;freertos" in line


def test_runner_component_is_required_by_main_only(tmp_path):
    """main/ requires the test runner component, which requires the runtime;
    the runtime requires nothing of the runner."""
    def requires(component):
        r = expand(tmp_path, REPO / component)
        return next(x for x in r.stderr.splitlines() if x.startswith("REQUIRES="))

    assert requires("components/espnn_test_runner").startswith("REQUIRES=espnn_runtime;")
    assert "espnn_test_runner" in requires("main")
    assert "espnn_test_runner" not in requires("components/espnn_runtime")


# The build pass after the expansion, for the component's own CMake code
# after idf_component_register: CONFIG_* values from sdkconfig, the target
# commands recorded instead of run.
BUILD_PASS = r"""
set(ESP_PLATFORM 1)
set(IDF_TARGET "esp32s3")
set(COMPONENT_LIB __idf_espnn_runtime)
{config}
macro(idf_component_register)
endmacro()
function(target_compile_options)
  message("target_compile_options: ${{ARGN}}")
endfunction()
function(target_compile_definitions)
  message("target_compile_definitions: ${{ARGN}}")
endfunction()
function(target_link_libraries)
  message("target_link_libraries: ${{ARGN}}")
endfunction()
function(target_include_directories)
  message("target_include_directories: ${{ARGN}}")
endfunction()
set(COMPONENT_DIR "{component}")
include("{component}/CMakeLists.txt")
"""


def build_pass(tmp_path, config: dict[str, str]):
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake is not installed")
    script = tmp_path / "build_pass.cmake"
    lines = "\n".join(f'set(CONFIG_{k} "{v}")' for k, v in config.items())
    script.write_text(BUILD_PASS.format(config=lines, component=(REPO / "components/espnn_runtime").as_posix()))
    return subprocess.run([cmake, "-P", str(script)], capture_output=True, text=True)


def test_kconfig_op_selection_reaches_the_registry(tmp_path):
    """CONFIG_ESPNN_SELECT_OPS with some CONFIG_ESPNN_OP_* on becomes the
    registry's ESPNN_OPS list; without it nothing is defined."""
    r = build_pass(tmp_path, {"ESPNN_SELECT_OPS": "y", "ESPNN_OP_CONV2D": "y", "ESPNN_OP_ADD": "",
                              "ESPNN_OP_RESHAPE": "y"})
    assert r.returncode == 0, r.stderr[-3000:]
    (line,) = [x for x in r.stderr.splitlines() if "ESPNN_OPS=" in x]
    assert line.startswith("target_compile_definitions: __idf_espnn_runtime;PRIVATE")
    assert sorted(line.split('ESPNN_OPS="')[1].rstrip('"').split(",")) == ["CONV2D", "RESHAPE"]
    r = build_pass(tmp_path, {"ESPNN_OP_CONV2D": "y", "ESPNN_OP_ADD": "y"})
    assert r.returncode == 0 and "ESPNN_OPS" not in r.stderr, r.stderr[-3000:]


def test_the_check_can_fail(tmp_path):
    """A glob with CONFIGURE_DEPENDS (as the runtime's source list had) is
    refused in script mode, as ESP-IDF refused it."""
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "CMakeLists.txt").write_text("file(GLOB x CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.cpp)\n"
                                        "idf_component_register(SRCS ${x})\n")
    r = expand(tmp_path, bad)
    assert r.returncode != 0 and "CONFIGURE_DEPENDS" in r.stderr
