"""tests/support/toolchain.py: tests that compile native code skip, with the reason,
where no compiler is reachable (an installed wheel needs none), and fail
instead under ESPNN_REQUIRE_TOOLCHAIN=1 (CI)."""

from __future__ import annotations

import os

import pytest

from support import toolchain


@pytest.fixture
def no_tools(monkeypatch, tmp_path):
    """PATH with one empty directory: no compiler, no cmake."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(toolchain.REQUIRE_ENV, raising=False)


@pytest.fixture
def only_cc(monkeypatch, tmp_path):
    """PATH where `gcc` is the only tool (an executable stub)."""
    gcc = tmp_path / "gcc"
    gcc.write_text("#!/bin/sh\nexit 0\n")
    gcc.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(toolchain.REQUIRE_ENV, raising=False)


def test_missing_tools_are_named(no_tools):
    why = toolchain.problem("cmake", "cc", "c++")
    assert why == ("not found on PATH: cmake; a C compiler (cc, gcc, clang); a C++ compiler (c++, g++, clang++) "
                   "(this test compiles native code; an installed wheel needs none)")


def test_any_compiler_of_the_family_counts(only_cc):
    assert toolchain.problem("cc") is None
    assert toolchain.problem("cc", "c++", "g++") == (
        "not found on PATH: a C++ compiler (c++, g++, clang++); g++ "
        "(this test compiles native code; an installed wheel needs none)")


def test_require_skips_with_the_reason(no_tools):
    with pytest.raises(pytest.skip.Exception, match="not found on PATH: cmake"):
        toolchain.require("cmake")


def test_require_fails_when_ci_requires_the_toolchain(no_tools, monkeypatch):
    monkeypatch.setenv(toolchain.REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="ESPNN_REQUIRE_TOOLCHAIN=1 but not found on PATH: cmake"):
        toolchain.require("cmake")


def test_nothing_happens_when_the_tools_are_there(only_cc, monkeypatch):
    monkeypatch.setenv(toolchain.REQUIRE_ENV, "1")
    toolchain.require("cc")  # neither skips nor fails
    assert os.environ["PATH"]
