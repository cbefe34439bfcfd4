"""Board tests through pytest-embedded: write a bundle / .pte suite into the
app's data partition, let pytest-embedded flash the runner app and read the
console, and check the ESPNN_RESULT lines (executorch_espnn.bundle.check_run,
which tests/firmware/test_result_log.py checks against the lines the host
runners print).

No board has ever run these (none was available); without pytest-embedded,
ESP-IDF or a board they are skipped with the reason. To run them:

    pip install ".[board]"                 # pytest-embedded, -serial-esp, -idf
    . $IDF_PATH/export.sh
    idf.py -B build-board set-target esp32s3 build          # bundle mode
    pytest tests/board --embedded-services esp,idf --app-path . --build-dir build-board \\
        --target esp32s3 --port /dev/ttyUSB0

or with ESPNN_BOARD_TARGET / ESPNN_BOARD_PORT in the environment instead of
--target / --port. For .pte mode build the app in .pte mode (docs/firmware.md)
into another build directory and pass that as --build-dir; each test runs
only against a build of its mode and skips otherwise.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HAVE_EMBEDDED = importlib.util.find_spec("pytest_embedded") is not None
# idf.py's default; pytest-embedded-idf's too.
DEFAULT_BUILD_DIR = "build"


def pytest_addoption(parser):
    # pytest-embedded defines --target/--port itself; these stand-ins only
    # let `pytest tests/board --target ... --port ...` parse (and skip with
    # the reason) where it is not installed.
    if HAVE_EMBEDDED:
        return
    group = parser.getgroup("espnn board (pytest-embedded is not installed)")
    for name in ("--target", "--port", "--app-path", "--build-dir"):
        try:
            group.addoption(name, default=None, help="see tests/board/conftest.py")
        except ValueError:  # defined by another plugin
            pass


def option(config, name: str, env: str | None = None) -> str | None:
    value = config.getoption(name, default=None)
    if value in (None, "") and env:
        value = os.environ.get(env) or None
    return value


def pytest_configure(config):
    config.addinivalue_line("markers", "board: needs a board on --port and pytest-embedded (tests/board)")
    # Defaults from the environment, never hard-coded ports.
    for name, env in (("port", "ESPNN_BOARD_PORT"), ("target", "ESPNN_BOARD_TARGET")):
        if getattr(config.option, name, None) in (None, "") and os.environ.get(env):
            setattr(config.option, name, os.environ[env])


@dataclass
class Board:
    target: str
    port: str
    build: Path
    sdkconfig: dict
    request: pytest.FixtureRequest

    @property
    def mode(self) -> str:
        return "pte" if self.sdkconfig.get("ESPNN_RUNNER_MODE_PTE") else "bundle"

    def require_mode(self, mode: str) -> None:
        if self.mode != mode:
            pytest.skip(f"{self.build} is a {self.mode}-mode build; build the runner in {mode} mode "
                        f"and pass its directory as --build-dir (docs/firmware.md)")

    def write_partition(self, data: bytes, tmp: Path) -> None:
        """Writes a bundle/suite into the runner's data partition with
        ESP-IDF's parttool.py (before pytest-embedded opens the port)."""
        label = self.sdkconfig.get("ESPNN_RUNNER_PARTITION_LABEL", "bundle")
        f = tmp / "partition.bin"
        f.write_bytes(data)
        tool = Path(os.environ["IDF_PATH"]) / "components/partition_table/parttool.py"
        cmd = [sys.executable, str(tool), "--port", self.port, "--partition-table-file",
               str(self.build / "partition_table/partition-table.bin"), "write_partition",
               "--partition-name", label, "--input", str(f)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"{' '.join(cmd)}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"

    def run(self, timeout: float = 600.0) -> str:
        """Flashes the app and resets the board (pytest-embedded's `dut`),
        returns the console text of one complete runner session."""
        import re

        dut = self.request.getfixturevalue("dut")
        m = dut.expect(re.compile(rb"(ESPNN_BEGIN|ESPNN_BUNDLE_ERROR|ESPNN_SUITE_ERROR).*?ESPNN_END[^\r\n]*",
                                  re.S), timeout=timeout)
        return m.group(0).decode(errors="replace")


@pytest.fixture
def board(request) -> Board:
    """The attached board, or a skip that says what is missing."""
    config = request.config
    if not HAVE_EMBEDDED:
        pytest.skip("pytest-embedded is not installed (pip install '.[board]')")
    services = config.getoption("embedded_services", default=None) or ""
    if not {"esp", "idf"} <= set(str(services).replace(",", " ").split()):
        pytest.skip("run with --embedded-services esp,idf (pytest-embedded's ESP-IDF services)")
    port = option(config, "port", "ESPNN_BOARD_PORT")
    target = option(config, "target", "ESPNN_BOARD_TARGET")
    if not port:
        pytest.skip("no board attached: pass --port (or set ESPNN_BOARD_PORT)")
    if not os.path.exists(port):
        pytest.skip(f"no board attached: {port} does not exist")
    if not target:
        pytest.skip("pass --target (or set ESPNN_BOARD_TARGET), e.g. esp32s3")
    if not os.environ.get("IDF_PATH"):
        pytest.skip("ESP-IDF is not set up (. $IDF_PATH/export.sh): parttool.py writes the data partition")
    app = Path(option(config, "app_path") or REPO)
    build = Path(option(config, "build_dir") or DEFAULT_BUILD_DIR)
    build = build if build.is_absolute() else app / build
    cfg = build / "config/sdkconfig.json"
    if not cfg.is_file():
        pytest.skip(f"no runner build at {build}: idf.py -B {build} set-target {target} build")
    sdk = json.loads(cfg.read_text())
    if sdk.get("IDF_TARGET") not in (None, target):
        pytest.fail(f"{build} was built for {sdk.get('IDF_TARGET')}, the board is a {target}")
    if sdk.get("ESPNN_RUNNER_BUNDLE_EMBEDDED"):
        pytest.skip(f"{build} embeds its test file; the board tests need the data-partition build")
    return Board(target, port, build, sdk, request)
