"""The native toolchain of the tests that compile C/C++ themselves (native
tools, sanitizer builds, syntax checks).

An installed wheel needs no compiler, so on a machine without one those
tests are skipped with the reason. CI sets ESPNN_REQUIRE_TOOLCHAIN=1
(.ci/run), which turns every such skip into a failure: there the toolchain
is installed and the tests must run.
"""

from __future__ import annotations

import os
import shutil

import pytest

REQUIRE_ENV = "ESPNN_REQUIRE_TOOLCHAIN"

# What CMake's project(... LANGUAGES C CXX) looks for, in its order.
C_COMPILERS = ("cc", "gcc", "clang")
CXX_COMPILERS = ("c++", "g++", "clang++")


def problem(*tools: str) -> str | None:
    """None when `tools` are on PATH, else why not. "cc"/"c++" stand for any
    C/C++ compiler (cc, gcc or clang / c++, g++ or clang++); other names must
    be found as they are (e.g. "cmake", "g++", "clang++")."""
    missing = []
    for tool in tools:
        if tool == "cc":
            ok = any(shutil.which(c) for c in C_COMPILERS)
            name = "a C compiler (" + ", ".join(C_COMPILERS) + ")"
        elif tool == "c++":
            ok = any(shutil.which(c) for c in CXX_COMPILERS)
            name = "a C++ compiler (" + ", ".join(CXX_COMPILERS) + ")"
        else:
            ok = shutil.which(tool) is not None
            name = tool
        if not ok:
            missing.append(name)
    if not missing:
        return None
    return ("not found on PATH: " + "; ".join(missing) + " (this test compiles native code; "
            "an installed wheel needs none)")


def required() -> bool:
    return os.environ.get(REQUIRE_ENV) == "1"


def skip_or_fail(why: str):
    """Skips with `why`, or fails when ESPNN_REQUIRE_TOOLCHAIN=1 (CI)."""
    if required():
        pytest.fail(f"{REQUIRE_ENV}=1 but {why}")
    pytest.skip(why)


def require(*tools: str) -> None:
    """Skips (fails under ESPNN_REQUIRE_TOOLCHAIN=1) unless `tools` are on PATH."""
    why = problem(*tools)
    if why:
        skip_or_fail(why)


def cmake_build_tools() -> tuple[str, ...]:
    """What a host/CMakeLists.txt build needs."""
    return ("cmake", "cc", "c++")
