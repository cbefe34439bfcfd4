"""ExecuTorch's shared operator suite runs with our `espnn` flow.

A handful of the suite's own cases (executorch.backends.test.suite.operators,
from the installed wheel) run in a child pytest with
executorch_espnn.testing.suite_plugin, exactly as docs/runtime.md tells a
developer to run the whole suite; they must pass *and* be delegated to
EspNNBackend (the suite counts an undelegated run as a pass). The full run
(~470 cases) is too slow for CI; its counts are in docs/runtime.md.
"""

import json

import pytest

pytest.importorskip("executorch")
pytest.importorskip("executorch.backends.test.suite.operators")

from suite_harness import run_suite_cases  # noqa: E402

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
    proc, rows = run_suite_cases(tmp_path, "espnn", CASES)
    tail = (proc.stdout + proc.stderr)[-3000:]
    assert proc.returncode == 0, tail
    seen = {r["test"].split("::")[-1] for r in rows}
    assert seen == {f"{c}[espnn]" for _, c in CASES}, sorted(seen)
    for r in rows:
        assert r["result"] == "Success (Delegated)", r
        assert r["delegated"] and r["delegated_ops"], r
    assert "espnn flow: suite result categories" in proc.stdout


def test_summary_merges_partial_runs(tmp_path):
    from executorch_espnn.testing.suite_summary import load, summarize

    def rec(test, sub, pytest_outcome, result, error="", cpu=None):
        return json.dumps({"test": test, "subtest": sub, "pytest": pytest_outcome, "result": result,
                           "delegated": result == "Success (Delegated)", "delegated_ops": {},
                           "undelegated_ops": cpu or {}, "error": error})

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(rec("m.py::t1[espnn]", 0, "passed", "Success (Delegated)") + "\n"
                 + rec("m.py::t2[espnn]", 0, "passed", "Success (Undelegated)", cpu={"aten::cat": 1}) + "\n")
    b.write_text(rec("m.py::t2[espnn]", 0, "passed", "Success (Undelegated)", cpu={"aten::cat": 1}) + "\n"
                 + rec("m.py::t3[espnn]", 0, "failed", "Fail (Lowering)", error="LoweringError: op 12") + "\n"
                 + rec("m.py::t3[espnn]", 1, "failed", "Fail (Lowering)", error="LoweringError: op 7") + "\n")
    records = load([a, b])
    assert len(records) == 4  # t2 counted once
    text = summarize(records)
    assert text.splitlines()[0] == "3 test cases: 2 passed, 1 failed"
    assert "     2  Fail (Lowering): LoweringError: op N" in text
    assert "     1  aten::cat" in text
