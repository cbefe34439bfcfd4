"""Runs cases of ExecuTorch's operator suite in a child pytest with our
plugin, as docs/runtime.md tells a developer to (helpers of the suite tests;
a module of its own, not conftest: cli_harness.py says why)."""

import importlib
import json
import os
import subprocess
import sys

import executorch_espnn

SUITE = "executorch.backends.test.suite.operators"


def run_suite_cases(tmp_path, flow: str, cases) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """(the child's process, its --espnn-suite-json records) for the
    (module, case) pairs of the suite, with flow `flow`."""
    records = tmp_path / "records.jsonl"
    suite_dir = os.path.dirname(importlib.import_module(SUITE).__file__)
    ids = [os.path.join(suite_dir, f"{mod}.py::{case}[{flow}]") for mod, case in cases]
    env = dict(os.environ)
    # The child imports the same executorch_espnn (source tree or install) as this process.
    pkg_root = os.path.dirname(os.path.dirname(executorch_espnn.__file__))
    env["PYTHONPATH"] = os.pathsep.join([pkg_root, env.get("PYTHONPATH", "")])
    # Given file paths and no config file, pytest takes their common folder
    # (operators/) as rootdir and, by default, loads no conftest.py above it:
    # the suite's own conftest (one level up, which parametrizes test_runner
    # over the flows) would be skipped and no [flow] case would exist.
    cmd = [sys.executable, "-m", "pytest", "-p", "executorch_espnn.testing.suite_plugin", "-m", f"flow_{flow}",
           *ids, "-q", "-p", "no:cacheprovider", "-W", "ignore", "--espnn-suite-json", str(records),
           "--confcutdir", os.path.dirname(suite_dir)]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    rows = [json.loads(line) for line in records.read_text().splitlines()] if records.exists() else []
    return proc, rows
