"""pytest plugin: ExecuTorch's operator suite with the ``espnn`` flow.

    python -m pytest -p executorch_espnn.testing.suite_plugin -m flow_espnn \\
        --pyargs executorch.backends.test.suite.operators

How it hooks in: the suite's conftest parametrizes its ``test_runner``
fixture over ``executorch.backends.test.suite.flow.all_flows()`` (a fixed
list of ExecuTorch's backends, no registration hook) and marks each case
``flow_<name>``. This plugin is imported by ``-p`` before that conftest is,
and wraps ``all_flows`` so the list also holds ``espnn``; ``-m flow_espnn``
then selects our cases. The suite's tests are not copied or changed.

It also
- starts the suite's test session with a fixed seed (``--espnn-suite-seed``,
  default 0; the suite otherwise draws a random one), so the inputs and
  counts are reproducible;
- prints, at the end, the suite's own per-case result categories for the
  espnn cases (delegated / undelegated success, quantize / lowering / run /
  output-mismatch failure, skipped) and the most frequent error messages;
- with ``--espnn-suite-json PATH`` appends one JSON line per lowered model
  (test id, result, delegated, delegated/undelegated op counts, error) as
  each case finishes, so a run that is stopped keeps what it measured.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest


def _install_flow() -> None:
    # lazy: `-p` imports this plugin as pytest starts; executorch's suite loads when the flow is installed
    from executorch.backends.test.suite import flow as flow_module

    from .suite_flow import ESPNN_OPLIB_TEST_FLOW, ESPNN_TEST_FLOW

    original = flow_module.all_flows
    if getattr(original, "_adds_espnn", False):
        return

    def all_flows():
        flows = dict(original())
        flows[ESPNN_TEST_FLOW.name] = ESPNN_TEST_FLOW
        flows[ESPNN_OPLIB_TEST_FLOW.name] = ESPNN_OPLIB_TEST_FLOW
        return flows

    all_flows._adds_espnn = True
    flow_module.all_flows = all_flows


_install_flow()  # at import: the suite's conftest binds all_flows when it is imported

_RECORDS = pytest.StashKey[list]()


def pytest_addoption(parser):
    group = parser.getgroup("espnn-suite", "ExecuTorch operator suite, espnn flow")
    group.addoption("--espnn-suite-seed", type=int, default=0,
                    help="seed of the suite's input generation (default 0)")
    group.addoption("--espnn-suite-json", default=None, metavar="PATH",
                    help="append one JSON line per lowered model of an espnn case to PATH")


def pytest_configure(config):
    # lazy: executorch's suite loads when the session is configured, not when `-p` imports the plugin
    from executorch.backends.test.suite import reporting

    config.stash[_RECORDS] = []
    # The suite's conftest declares its flow_*/backend_* markers only once it
    # is collected, after the cases are marked: declare ours up front.
    config.addinivalue_line("markers", "flow_espnn: ExecuTorch suite case run with the espnn flow")
    config.addinivalue_line("markers", "flow_espnn_oplib: ExecuTorch suite case run with the espnn_oplib flow "
                            "(espnn:: operator library, bit-exact with the delegate where both run the ops)")
    config.addinivalue_line("markers", "backend_espnn: ExecuTorch suite case for the espnn backend")
    if reporting.get_active_test_session() is None:
        reporting.begin_test_session(None, seed=config.getoption("--espnn-suite-seed"))


def _error_line(error) -> str:
    """The exception type and its first two non-empty message lines (some
    ExecuTorch errors start with an empty line)."""
    if error is None:
        return ""
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()][:2]
    return f"{type(error).__name__}: {' | '.join(lines)}"[:240]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when != "call":
        return
    runner = getattr(item, "funcargs", {}).get("test_runner")
    flow = getattr(runner, "_flow", None)
    if flow is None or flow.name not in ("espnn", "espnn_oplib"):
        return
    report = outcome.get_result()
    path = item.config.getoption("--espnn-suite-json")
    for summary in runner._results:
        record = {
            "test": item.nodeid,
            "subtest": summary.subtest_index,
            "pytest": report.outcome,
            "result": summary.result.display_name(),
            "delegated": bool(summary.is_delegated()),
            "delegated_ops": dict(summary.delegated_op_counts or {}),
            "undelegated_ops": dict(summary.undelegated_op_counts or {}),
            "error": _error_line(summary.error),
        }
        item.config.stash[_RECORDS].append(record)
        if path:
            with open(path, "a") as f:
                f.write(json.dumps(record) + "\n")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    records = config.stash.get(_RECORDS, [])
    if not records:
        return
    tr = terminalreporter
    tr.section("espnn flow: suite result categories (per lowered model)")
    for result, n in Counter(r["result"] for r in records).most_common():
        tr.write_line(f"{n:6d}  {result}")
    tr.write_line(f"{sum(r['delegated'] for r in records):6d}  with at least one EspNNBackend delegate")
    errors = Counter(f"{r['result']}: {r['error']}" for r in records if r["error"])
    if errors:
        tr.write_line("most frequent errors:")
        for text, n in errors.most_common(10):
            tr.write_line(f"{n:6d}  {text}")
