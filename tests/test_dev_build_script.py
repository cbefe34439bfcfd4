"""scripts/dev-build.sh (README: Developing) builds with the python3 on PATH,
not in pip's isolated build environment: without pybind11 there it must say
so in one line instead of failing inside CMake."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_dev_build_names_a_missing_pybind11(tmp_path):
    shim = tmp_path / "bin"
    shim.mkdir()
    python = shim / "python3"
    python.write_text("#!/bin/sh\necho 'No module named pybind11' >&2\nexit 1\n")
    python.chmod(0o755)
    env = {**os.environ, "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}"}
    r = subprocess.run(["bash", str(REPO / "scripts/dev-build.sh"), str(tmp_path / "build")], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "has no pybind11; install it first: pip install 'pybind11>=2.12'" in r.stderr
    assert not (tmp_path / "build" / "build.ninja").exists()
