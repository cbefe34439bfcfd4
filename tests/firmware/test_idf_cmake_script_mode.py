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

import toolchain

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
@pytest.mark.parametrize("component", ["components/espnn_runtime", "main"])
def test_component_cmakelists_survive_early_expansion(tmp_path, component, target):
    r = expand(tmp_path, REPO / component, target)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "PRIV_REQUIRES=" in r.stderr  # reached idf_component_register


def test_runtime_requirements_recorded(tmp_path):
    r = expand(tmp_path, REPO / "components/espnn_runtime")
    line = next(x for x in r.stderr.splitlines() if x.startswith("REQUIRES="))
    assert "PRIV_REQUIRES=esp_timer;esp_hw_support;heap;log;freertos" in line


def test_the_check_can_fail(tmp_path):
    """A glob with CONFIGURE_DEPENDS (as the runtime's source list had) is
    refused in script mode, as ESP-IDF refused it."""
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "CMakeLists.txt").write_text("file(GLOB x CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.cpp)\n"
                                        "idf_component_register(SRCS ${x})\n")
    r = expand(tmp_path, bad)
    assert r.returncode != 0 and "CONFIGURE_DEPENDS" in r.stderr
