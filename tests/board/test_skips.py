"""Where no board can be reached (this machine, CI) the board tests must
skip and say why - never pass silently, never error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .conftest import HAVE_EMBEDDED

HERE = Path(__file__).resolve().parent


def _run(*args: str, env_extra: dict | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ESPNN_BOARD_")}
    env.update(env_extra or {})
    r = subprocess.run([sys.executable, "-m", "pytest", str(HERE / "test_board.py"), "-q", "-rs",
                        "-p", "no:cacheprovider", *args], capture_output=True, text=True, env=env,
                       cwd=HERE.parents[1], timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


def test_board_tests_skip_with_the_reason():
    out = _run("--port", "/dev/espnn-no-such-port", "--target", "esp32s3")
    assert "2 skipped" in out, out
    if HAVE_EMBEDDED:
        assert "--embedded-services esp,idf" in out or "does not exist" in out, out
    else:
        assert "pytest-embedded is not installed" in out, out


def test_port_and_target_come_from_the_environment():
    """No port is hard-coded: without --port and ESPNN_BOARD_PORT nothing
    is opened; ESPNN_BOARD_PORT is used when set."""
    if HAVE_EMBEDDED:
        out = _run("--embedded-services", "esp,idf")
        assert "no board attached: pass --port" in out, out
        out = _run("--embedded-services", "esp,idf",
                   env_extra={"ESPNN_BOARD_PORT": "/dev/espnn-env-port", "ESPNN_BOARD_TARGET": "esp32"})
        assert "/dev/espnn-env-port does not exist" in out, out
    else:
        out = _run(env_extra={"ESPNN_BOARD_PORT": "/dev/espnn-env-port"})
        assert "pytest-embedded is not installed" in out, out


def test_the_board_bundle_can_be_written():
    """The bundle the board test flashes is built without a board, so a
    mistake in it (duplicate case names did this once) shows up here."""
    from executorch_espnn import bundle as B

    from .test_board import bundle_cases

    cases = bundle_cases()
    read = B.read_bundle(B.write_bundle(cases))
    assert [c["name"] for c in read] == [c.name for c in cases] and len(cases) >= 3
