"""The runner app built by ESP-IDF for esp32s3 and esp32 with the Xtensa
toolchain, run on Espressif's QEMU (tools/qemu-esp): the op corpus and zoo
models from the bundle partition, every output bit-exact with the host
runtime. On esp32s3 the build uses ESP-NN's optimized kernels
(CONFIG_NN_OPTIMIZED, the S3 assembly) - the emulator executes the S3's
vector instructions. Skipped with the reason without ESP-IDF, the toolchain
or Espressif's QEMU (ESPNN_QEMU_ESP).

Emulated, not silicon: QEMU executes the instructions, with no cycle model,
caches or flash wait states. Known emulator defects are documented in
docs/firmware.md; expected outputs are never adapted to the emulator."""

from __future__ import annotations

import sys

import pytest

from executorch_espnn import bundle as B

from espnn_dev import idf_project
from espnn_dev.dispatch_cases import softmax_row_cases

TARGETS = ["esp32s3", "esp32"]


def _why(target: str) -> str | None:
    return idf_project.problem(target) or idf_project.qemu_problem(target)


@pytest.fixture(scope="module", params=TARGETS)
def runner(request, tmp_path_factory):
    """(target, the bundle-mode runner build reading the data partition)."""
    target = request.param
    why = _why(target)
    if why:
        pytest.skip(why)
    build = idf_project.build(tmp_path_factory.mktemp(f"idf_{target}"), target)
    assert idf_project.warnings_in_our_sources(build.log) == []
    sdk = build.sdkconfig()
    assert sdk["ESPNN_RUNNER_BUNDLE_PARTITION"] and (target != "esp32s3" or sdk["NN_OPTIMIZED"])
    return target, build


def _run(build, cases, tmp_path, **kw) -> B.RunLog:
    path = tmp_path / "bundle.xtsb"
    path.write_bytes(B.write_bundle(cases))
    return _run_file(build, path, **kw)


def _run_file(build, path, **kw) -> B.RunLog:
    r = idf_project.run_on_qemu(build, path, **kw)
    assert r.returncode in (0, 1), f"qemu-esp exit {r.returncode}:\n{r.stdout[-4000:]}\n{r.stderr[-2000:]}"
    return B.check_run(r.stdout)


def _failures(run: B.RunLog) -> list:
    return [(k, v.get("status"), v.get("stage"), v.get("msg")) for k, v in run.results.items()
            if v.get("status") != "pass"]


def _passed(run: B.RunLog, names: list[str]) -> None:
    """Exactly `names` reported, each one passed (a missing case fails too)."""
    assert list(run.results) == names, (list(run.results), names)
    assert run.ok, _failures(run)


def test_op_corpus_bit_exact_under_qemu(runner, tmp_path):
    from espnn_dev import op_corpus

    target, build = runner
    cases = op_corpus.bundle_cases(runs=2)
    run = _run(build, cases, tmp_path)
    assert run.begin["platform"] == target
    _passed(run, [c.name for c in cases])
    for rec in run.results.values():  # the chip's cycle counter and heap statistics are there
        assert isinstance(rec["cycles_mean"], int) and isinstance(rec["heap_free_min"], int)
        assert rec["model_mem"] == "flash"  # weights in place, memory-mapped


def test_negative_control_one_flipped_byte_fails(runner, tmp_path):
    """The same op corpus with one expected byte of one case flipped: qemu-esp
    exits 1 and exactly that case fails, at the verify stage, named."""
    from espnn_dev import op_corpus

    _, build = runner
    cases = op_corpus.bundle_cases(runs=1)
    victim = cases[0]
    first = victim.expected[0].copy()
    first.reshape(-1).view("uint8")[0] ^= 0x01
    victim.expected = [first, *victim.expected[1:]]
    path = tmp_path / "negative.xtsb"
    path.write_bytes(B.write_bundle(cases))
    r = idf_project.run_on_qemu(build, path)
    assert r.returncode == 1, r.stdout[-3000:]
    run = B.check_run(r.stdout)
    failed = {k: v for k, v in run.results.items() if v.get("status") != "pass"}
    assert list(failed) == [victim.name], failed
    assert failed[victim.name]["status"] == "mismatch" and failed[victim.name]["stage"] == "verify", failed
    assert len(run.results) == len(cases)


def _emulated():
    """benchmarks/emulated.py: its single-op cases, model bundles and
    instruction-counted runs are what these tests check."""
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import emulated

    return emulated


@pytest.mark.parametrize("model", ["ds_cnn", "mobilenet_v2_05_96", "mobilenet_v2_224"])
def test_zoo_model_bit_exact_under_qemu(runner, tmp_path, model):
    target, build = runner
    if model != "ds_cnn" and not build.sdkconfig().get("SPIRAM"):
        # ESP-NN's S3 1x1 conv copies its filter into scratch (MobileNetV2's
        # 1x1 head conv alone asks for 204,864 B); the ESP32 has about 100 KiB
        # of free internal RAM.
        pytest.skip(f"MobileNetV2 needs PSRAM ({target} as shipped has none)")
    path = _emulated().model_bundle(model, tmp_path, runs=1)
    run = _run_file(build, path)
    (name,) = run.results  # one delegate: one case, named after the payload
    _passed(run, [name])
    rec = run.results[name]
    # Placement follows the memory policy (internal first, PSRAM when a block
    # does not fit); the line names where each block went.
    assert rec["arena_mem"] in ("internal", "psram") and rec["model_mem"] == "flash"
    if rec.get("scratch"):
        assert rec["scratch_mem"] in ("internal", "psram")


def test_softmax_rows_not_multiple_of_16_bit_exact(runner, tmp_path):
    target, build = runner
    cases = softmax_row_cases()
    run = _run(build, cases, tmp_path)
    _passed(run, [c.name for c in cases])


def depthwise_tiled_padding_cases() -> list[B.BundleCase]:
    """DEPTHWISE_CONV2D at MobileNetV3-Small-224's 5x5 shapes, with the
    input zero point its hard-swish outputs have (-112). ESP-NN 1.2.3's S3
    depthwise takes these (ch_mult 1, C % 8 == 0, not 3x3, int16 copies of
    filter and input > 48 KiB) through its row-tiled s16 mult1 path, which
    fills the rows above and below the image with input_offset instead of
    skipping those taps: the top and bottom output rows come out wrong
    unless the runtime sends them to ANSI (depthwise_conv.cpp)."""
    import numpy as np
    from espnn_dev.graph_util import Const, Input, Out, build_op

    from executorch_espnn import quant_params as qp

    rng = np.random.default_rng(5)
    cases = []
    # (H, W, C, stride): 14x14x240 (two layers of the network), 28x28x96 at
    # stride 2 (one row past the bottom), 7x7x576 (windows outside at both ends).
    for h, w, c, stride in ((14, 14, 240, 1), (28, 28, 96, 2), (7, 7, 576, 1)):
        oh, ow = (h - 1) // stride + 1, (w - 1) // stride + 1
        mult, shift = qp.conv_multipliers(0.05, np.full(c, 0.02, np.float32), 0.05)
        blob, feeds = build_op(
            "DEPTHWISE_CONV2D",
            [Input(rng.integers(-128, 128, (1, h, w, c)).astype(np.int8), 0.05, -112),
             Const(rng.integers(-127, 128, (1, 5, 5, c)).astype(np.int8)),
             Const(rng.integers(-500, 500, c).astype(np.int32)), Const(mult), Const(shift)],
            [Out((1, oh, ow, c), "INT8", 0.05, 0)],
            stride_h=stride, stride_w=stride, pad_top=2, pad_left=2, dilation_h=1, dilation_w=1, ch_mult=1,
            input_offset=112, output_offset=0, act_min=-128, act_max=127)
        cases.append(B.make_case(f"dw5x5_{h}x{w}x{c}_s{stride}", blob, feeds, runs=1))
    return cases


def test_depthwise_5x5_with_padding_rows_bit_exact(runner, tmp_path):
    target, build = runner
    if target != "esp32s3":
        pytest.skip("the ESP-NN path under test is the ESP32-S3's (the ESP32 build runs generic C)")
    cases = depthwise_tiled_padding_cases()
    run = _run(build, cases, tmp_path)
    _passed(run, [c.name for c in cases])


def test_pte_suite_with_cpu_fallback_under_qemu(tmp_path):
    """.pte mode on the emulated ESP32-S3: ExecuTorch cross-built by
    scripts/build-executorch-esp.sh (ESPNN_EXECUTORCH_BUILDS/esp32s3, built
    with --suite of a conv->sin suite), the runner reading the suite from its
    data partition: EspNNBackend runs the conv on ESP-NN's S3 kernels,
    ExecuTorch's portable kernel the sin."""
    why = _why("esp32s3")
    if why:
        pytest.skip(why)
    from executorch_espnn import pte_suite as S
    from espnn_dev import pte_models

    ops = idf_project.program_operators(pte_models.conv_then_cpu_pte())
    ops |= idf_project.program_operators(pte_models.channels_last_input_pte())
    et, why = idf_project.executorch_build("esp32s3", sorted(ops))
    if et is None:
        pytest.skip(why)

    build = idf_project.build(tmp_path, "esp32s3", defaults=["CONFIG_ESPNN_RUNNER_MODE_PTE=y",
                                                             "CONFIG_ESPNN_EXECUTORCH_BACKEND=y",
                                                             "CONFIG_ESPNN_PAL_EXECUTORCH=y"],
                              defines={"ESPNN_EXECUTORCH_DIR": str(et)})
    assert idf_project.warnings_in_our_sources(build.log) == []
    suite = S.make_suite(pte_models.conv_then_cpu_pte(), cases=3, runs=2, atol=1e-5)
    path = tmp_path / "suite.xtsp"
    path.write_bytes(S.write_suite(suite))
    run = _run_file(build, path)
    assert run.mode == "pte" and run.begin["platform"] == "esp32s3"
    assert list(run.results) == [c.name for c in suite.cases] and run.ok, _failures(run)
    # The device-side dim-order refusal: a program recording a channels-last
    # input; the case passes only when the delegate refuses it (InvalidArgument).
    refusal = tmp_path / "dim_order.xtsp"
    refusal.write_bytes(S.write_suite(pte_models.dim_order_refusal_suite()))
    run = _run_file(build, refusal)
    assert list(run.results) == ["dim_order_refused"] and run.ok, _failures(run)
    assert run.results["dim_order_refused"].get("refused") == "InvalidArgument"


def test_s3_dispatch_rules_match_the_emulated_build(tmp_path_factory):
    """analysis/s3_dispatch.py says, per op, whether an optimized ESP32-S3
    build runs an ESP-NN SIMD routine. Measured here instead: each single-op
    case of benchmarks/emulated.py on two esp32s3 builds (ESP-NN optimized
    and ESP-NN ANSI C), guest instructions per run. Where the table says
    SIMD, the optimized build must execute well under the ANSI build's
    instructions; where it says not, about the same."""
    why = _why("esp32s3")
    if why:
        pytest.skip(why)
    import json
    import os

    from executorch_espnn.analysis import payload_metrics

    emulated = _emulated()
    work = tmp_path_factory.mktemp("dispatch")
    cases = emulated.op_cases(runs=1)
    bundle = work / "ops.xtsb"
    bundle.write_bytes(B.write_bundle(cases))
    counts = {}
    for label, extra in (("simd", []), ("ansi", ["CONFIG_NN_ANSI_C=y"])):
        build = idf_project.build(work / label, "esp32s3", defaults=extra)
        run, per_case = emulated.run_counted(os.environ["ESPNN_QEMU_ESP"], build.build, bundle, work, timeout=1800)
        assert run.ok, _failures(run)
        counts[label] = {k: v[0] for k, v in per_case.items()}
    report = {}
    for c in cases:
        (op,) = payload_metrics(c.model).ops
        ratio = counts["simd"][c.name] / counts["ansi"][c.name]
        report[c.name] = (op.s3_simd, round(ratio, 3), op.kernel)
        if op.s3_simd:
            assert ratio < 0.6, (c.name, op.kernel, ratio)
        else:
            assert 0.9 < ratio < 1.1, (c.name, op.kernel, ratio)
    print(json.dumps(report, indent=1))
