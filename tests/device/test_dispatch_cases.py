"""tests/dispatch_cases.py without an emulator: every case is a one-op graph
the host runs, and every kernel the runtime's S3 routing can name has a case.

The runtime lists, per op family, every kernel its route description can
return (src/ops/s3_route.h, ``_native.S3_ROUTE_RULES``, through
``analysis.s3_dispatch.KERNELS``), so a new branch without a case fails here,
before anyone spends emulator time (tools/device-evidence/collect.py and
tests/idf run these cases on an emulated ESP32-S3)."""

from __future__ import annotations

import re

import dispatch_cases
import numpy as np
import pytest
from executorch_espnn import _native
from executorch_espnn.analysis import payload_metrics, s3_dispatch

# Kernels of the runtime's routing that no case has to cover, each with why.
# Only what is genuinely impractical belongs here. (The conv/depthwise
# "image pointers not 16-byte aligned" branches cannot be built either - the
# arena is 16-byte aligned, so image 0 always is - but their kernels,
# esp_nn_conv_s8_ansi and esp_nn_depthwise_conv_s8_ansi, are reached by the
# padding-defect and scratch-defect cases, so they need no entry.)
EXCLUDED: dict[str, str] = {
    re.escape(f"esp_nn_{op}_elementwise_s8_ansi"): (
        "equal-size operands not 16-byte aligned: arena and constant offsets are 16-byte aligned, so a "
        "one-op graph cannot build them (a fused region's band or an EXTERNAL feed could)")
    for op in ("add", "mul")
}


@pytest.fixture(scope="module")
def cases():
    return dispatch_cases.cases(runs=1)


@pytest.fixture(scope="module")
def kernels():
    return dispatch_cases.expected_kernels()


def kernel_patterns(kernels_by_op: dict[str, tuple[str, ...]], default: str) -> list[str]:
    """Every kernel the routing can name, as full-match regexes."""
    return sorted({re.escape(k) for ks in kernels_by_op.values() for k in ks} | {re.escape(default)})


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
    patterns = kernel_patterns(s3_dispatch.KERNELS, s3_dispatch.DEFAULT_KERNEL)
    assert {re.escape("esp_nn_add_elementwise_s8_esp32s3"), re.escape("mul scalar loop"),
            re.escape("esp_nn_mean_nhwc_s8 (C)"), re.escape("interpreter")} <= set(patterns), patterns
    assert len(patterns) >= 25, patterns
    stale = [p for p in EXCLUDED if p not in patterns]
    assert not stale, f"exclusions that are no kernel of the runtime's routing any more: {stale}"
    missing = missing_kernels(patterns, kernels.values(), EXCLUDED)
    assert not missing, f"routing kernels without a case in tests/dispatch_cases.py: {missing}"


def test_the_coverage_check_reports_a_new_branch(kernels):
    # A kernel added to an op family's list (here: to a copy of the lists) that no case reaches.
    grown = {**s3_dispatch.KERNELS, "ADD": (*s3_dispatch.KERNELS["ADD"], "esp_nn_fake_kernel_esp32s3")}
    missing = missing_kernels(kernel_patterns(grown, s3_dispatch.DEFAULT_KERNEL), kernels.values(), EXCLUDED)
    assert missing == [re.escape("esp_nn_fake_kernel_esp32s3")], missing
    # and a kernel string alone, fed to the checker directly
    assert missing_kernels(["no such kernel"], kernels.values()) == ["no such kernel"]
    assert missing_kernels([".+ scalar loop"], ["add scalar loop"]) == []


def test_every_case_kernel_is_one_the_routing_lists(kernels, cases):
    # The lists the coverage check reads are complete: each case's kernel is listed for its opcode.
    for c in cases:
        (op,) = payload_metrics(c.model).ops
        listed = s3_dispatch.KERNELS.get(op.opcode, (s3_dispatch.DEFAULT_KERNEL,))
        assert op.kernel in listed, (c.name, op.opcode, op.kernel)


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
