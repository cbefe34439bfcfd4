"""tools/espnn_dev/dispatch_cases.py without an emulator: every case is a one-op graph
the host runs, and every branch of analysis/s3_dispatch.py has a case.

The coverage test reads the ``kernel`` argument of every ``S3Path(...)``
call in s3_dispatch.py's source, so a new branch without a case fails here,
before anyone spends emulator time (tools/device-evidence/collect.py and
tests/idf run these cases on an emulated ESP32-S3)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from espnn_dev import dispatch_cases
import numpy as np
import pytest
from executorch_espnn import _native
from executorch_espnn.analysis import payload_metrics, s3_dispatch

S3_DISPATCH = Path(s3_dispatch.__file__)

# Kernel patterns of s3_dispatch.py that no case has to cover, each with why.
# Only what is genuinely impractical belongs here. (The conv/depthwise
# "image pointers not 16-byte aligned" branches cannot be built either - the
# arena is 16-byte aligned, so image 0 always is - but their kernels,
# esp_nn_conv_s8_ansi and esp_nn_depthwise_conv_s8_ansi, are reached by the
# padding-defect and scratch-defect cases, so they need no entry.)
EXCLUDED: dict[str, str] = {}


@pytest.fixture(scope="module")
def cases():
    return dispatch_cases.cases(runs=1)


@pytest.fixture(scope="module")
def kernels():
    return dispatch_cases.expected_kernels()


# ---------------------------------------------------------------- the source's kernels
def _param_index(fn: ast.FunctionDef, name: str) -> int | None:
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    return names.index(name) if name in names else None


def _call_arg(call: ast.Call, index: int, name: str):
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return call.args[index] if index < len(call.args) else None


def _const_args(tree: ast.Module, fn: ast.FunctionDef, param: str) -> list[str] | None:
    """The constant strings passed for `param` at every call of `fn` in the module
    (None if some call passes anything else, or there is no call)."""
    index = _param_index(fn, param)
    values = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == fn.name:
            arg = _call_arg(node, index, param)
            if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                return None
            values.append(arg.value)
    return values or None


def _owner(stack: list[ast.FunctionDef], name: str) -> ast.FunctionDef | None:
    """The innermost enclosing function that has `name` as a parameter."""
    for fn in reversed(stack):
        if _param_index(fn, name) is not None:
            return fn
    return None


def _patterns(tree: ast.Module, node: ast.expr, stack: list[ast.FunctionDef]) -> list[str]:
    """Regexes for one kernel expression. A constant is itself; a parameter of an
    enclosing factory (``_scalar(kernel, why)``) is each constant its calls pass; in
    an f-string, a field that is such a parameter is expanded the same way (one
    pattern per call of the factory) and any other field becomes ``.+``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [re.escape(node.value)]
    if isinstance(node, ast.Name):
        fn = _owner(stack, node.id)
        values = _const_args(tree, fn, node.id) if fn else None
        return [re.escape(v) for v in values] if values else [".+"]
    if isinstance(node, ast.JoinedStr):
        fields = [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
        owners = {f.id: _owner(stack, f.id) for f in fields if isinstance(f, ast.Name)}
        factories = {fn.name for fn in owners.values() if fn is not None}
        per_call: list[dict[str, str]] = [{}]
        if len(factories) == 1:
            fn = next(fn for fn in owners.values() if fn is not None)
            columns = {name: _const_args(tree, fn, name) for name, o in owners.items() if o is fn}
            if all(columns.values()):
                per_call = [dict(zip(columns, row)) for row in zip(*columns.values())]
        out = []
        for subst in per_call:
            parts = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    parts.append(re.escape(v.value))
                elif isinstance(v.value, ast.Name) and v.value.id in subst:
                    parts.append(re.escape(subst[v.value.id]))
                else:
                    parts.append(".+")
            out.append("".join(parts))
        return sorted(set(out))
    return [".+"]  # an expression the checker cannot read: matches anything, flagged below


def kernel_patterns(source: str) -> list[str]:
    """Every kernel an ``S3Path(simd, simd_fraction, kernel, reason)`` call in `source`
    can return, as full-match regexes."""
    tree = ast.parse(source)
    found: set[str] = set()

    def visit(node, stack):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            stack = [*stack, node]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "S3Path":
            kernel = _call_arg(node, 2, "kernel")
            assert kernel is not None, f"S3Path call without a kernel at line {node.lineno}"
            found.update(_patterns(tree, kernel, stack))
        for child in ast.iter_child_nodes(node):
            visit(child, stack)

    visit(tree, [])
    return sorted(found)


def missing_kernels(patterns, case_kernels, excluded=()) -> list[str]:
    """The patterns no case kernel full-matches, less the excluded ones."""
    return [p for p in patterns
            if p not in excluded and not any(re.fullmatch(p, k) for k in case_kernels)]


# ---------------------------------------------------------------- tests
def test_every_case_is_one_op_the_host_runs(cases):
    assert len({c.name for c in cases}) == len(cases)
    for c in cases:
        summary = _native.parse(c.model)
        assert len(summary["ops"]) == 1, (c.name, [op["op"] for op in summary["ops"]])
        # make_case ran it on the host; the outputs are those of this model and these inputs.
        again = _native.run(c.model, c.inputs)
        assert len(again) == len(c.expected) == len(summary["outputs"]), c.name
        for got, want in zip(again, c.expected):
            np.testing.assert_array_equal(np.asarray(got), want, err_msg=c.name)
        assert all(a.dtype == np.int8 for a in c.inputs), c.name
        assert c.runs == 1


def test_cases_take_the_rules_opcodes(kernels, cases):
    opcodes = {payload_metrics(c.model).ops[0].opcode for c in cases}
    assert set(s3_dispatch.RULES) <= opcodes, set(s3_dispatch.RULES) - opcodes
    assert set(kernels) == {c.name for c in cases}


def test_every_s3_dispatch_branch_has_a_case(kernels):
    patterns = kernel_patterns(S3_DISPATCH.read_text())
    # The checker must see the table's factories expanded, not turned into ".+".
    assert ".+" not in patterns, patterns
    assert {re.escape("esp_nn_add_elementwise_s8_esp32s3"), re.escape("mul scalar loop"),
            re.escape("esp_nn_mean_nhwc_s8 (C)")} <= set(patterns), patterns
    assert len(patterns) >= 25, patterns
    stale = [p for p in EXCLUDED if p not in patterns]
    assert not stale, f"exclusions that are no kernel of s3_dispatch.py any more: {stale}"
    missing = missing_kernels(patterns, kernels.values(), EXCLUDED)
    assert not missing, f"s3_dispatch.py kernels without a case in tools/espnn_dev/dispatch_cases.py: {missing}"


def test_the_coverage_check_reports_a_new_branch(kernels):
    # A classifier added to s3_dispatch.py (here: to a copy of its source) with a kernel
    # no case reaches, once as a constant and once through a factory's f-string.
    source = S3_DISPATCH.read_text() + (
        "\n\ndef fake_rule(summary, op):\n"
        "    return S3Path(True, 1.0, 'esp_nn_fake_kernel_esp32s3', 'a branch without a case')\n"
        "\n\ndef _fake_factory(label):\n"
        "    def rule(summary, op):\n"
        "        return S3Path(False, 0.0, f'fake {label} loop', 'another')\n"
        "    return rule\n"
        "\n\nFAKE = {'X': _fake_factory('widget')}\n")
    missing = missing_kernels(kernel_patterns(source), kernels.values(), EXCLUDED)
    assert missing == [re.escape("esp_nn_fake_kernel_esp32s3"), re.escape("fake widget loop")], missing
    # and a kernel string alone, fed to the checker directly
    assert missing_kernels(["no such kernel"], kernels.values()) == ["no such kernel"]
    assert missing_kernels([".+ scalar loop"], ["add scalar loop"]) == []


def test_no_two_cases_take_the_same_branch(cases):
    # The branch is (kernel, reason) from payload_metrics, per classifier (opcode: ADD and
    # MUL share the "interpreter broadcast loop" branch but run different arithmetic); the
    # SIMD share of the op's MACs (or, for ops without MACs, whether it is SIMD) tells the
    # half-misaligned batches apart from the aligned case of the same kernel and rule.
    seen: dict[tuple, str] = {}
    for c in cases:
        (op,) = payload_metrics(c.model).ops
        share = round(op.s3_simd_macs / op.macs, 3) if op.macs else op.s3_simd
        key = (op.opcode, op.kernel, op.reason, share)
        assert key not in seen, f"{c.name} and {seen[key]} take the same branch {key}"
        seen[key] = c.name


def test_misaligned_batches_are_half_simd(cases):
    by_name = {c.name: c for c in cases}
    for name in ("conv_misaligned_images_half", "dw_misaligned_images_half"):
        (op,) = payload_metrics(by_name[name].model).ops
        assert op.s3_simd and op.s3_simd_macs * 2 == op.macs, (name, op)


def test_cases_are_small(cases):
    # Quick under an emulator: at most 300 K MACs and 80 KB of activations per case.
    for c in cases:
        m = payload_metrics(c.model)
        assert m.macs <= 300_000, (c.name, m.macs)
        assert m.arena_bytes <= 80 * 1024, (c.name, m.arena_bytes)
