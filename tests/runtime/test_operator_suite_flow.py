"""ExecuTorch's shared operator suite runs with our `espnn` flow.

A handful of the suite's own cases (executorch.backends.test.suite.operators,
from the installed wheel) run in a child pytest with
executorch_espnn.testing.suite_plugin, exactly as docs/runtime.md tells a
developer to run the whole suite; they must pass *and* be delegated to
EspNNBackend (the suite counts an undelegated run as a pass). The full run
(~470 cases) is too slow for CI; its counts are in docs/runtime.md.
"""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("executorch")
pytest.importorskip("executorch.backends.test.suite.operators")

import executorch_espnn  # noqa: E402

SUITE = "executorch.backends.test.suite.operators"
# (suite module, case): conv, linear, add, mul (broadcast), LUT activation, hard-swish.
# Ops the quantizer only quantizes next to a quantized neighbour (pools, cat,
# permute...) stay float in the suite's one-op models, so they are not here.
CASES = [
    ("test_conv2d", "test_conv2d_basic"),
    ("test_linear", "test_linear_unbatched"),
    ("test_add", "test_add_f32_bcast_first"),
    ("test_mul", "test_multiply_f32_bcast_first"),
    ("test_sigmoid", "test_sigmoid_f32_multi_dim"),
    ("test_hardswish", "test_hardswish_f32_multi_dim"),
]


def test_espnn_flow_is_registered_with_the_suite():
    from executorch.backends.test.suite import flow

    import executorch_espnn.testing.suite_plugin  # noqa: F401  (installs the flow)

    flows = flow.all_flows()
    assert flows["espnn"].backend == "espnn" and flows["espnn"].quantize
    assert "portable" in flows  # the suite's own flows are kept


def test_suite_cases_pass_delegated_through_executorch_runtime(tmp_path):
    import importlib

    records = tmp_path / "records.jsonl"
    suite_dir = os.path.dirname(importlib.import_module(SUITE).__file__)
    ids = [os.path.join(suite_dir, f"{mod}.py::{case}[espnn]") for mod, case in CASES]
    env = dict(os.environ)
    # The child imports the same executorch_espnn (source tree or install) as this process.
    pkg_root = os.path.dirname(os.path.dirname(executorch_espnn.__file__))
    env["PYTHONPATH"] = os.pathsep.join([pkg_root, env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "pytest", "-p", "executorch_espnn.testing.suite_plugin", "-m", "flow_espnn",
           *ids, "-q", "-p", "no:cacheprovider", "-W", "ignore", "--espnn-suite-json", str(records)]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    tail = (proc.stdout + proc.stderr)[-3000:]
    assert proc.returncode == 0, tail
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    seen = {r["test"].split("::")[-1] for r in rows}
    assert seen == {f"{c}[espnn]" for _, c in CASES}, sorted(seen)
    for r in rows:
        assert r["result"] == "Success (Delegated)", r
        assert r["delegated"] and r["delegated_ops"], r
    assert "espnn flow: suite result categories" in proc.stdout
