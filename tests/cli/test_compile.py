"""espnn compile: the main job (default model), CPU fallback with reasons,
strict mode, targets, QAT, data sources."""

import json

import numpy as np

from cli_harness import HERE, error_line, espnn, validate

MODELS = HERE / "cli_models.py"


def test_default_model_compiles_runs_on_host_and_reports(compiled):
    r, d = compiled
    assert r.code == 0, r
    # The delegation table: one ESP-NN partition, nothing on the CPU, arena/MACs columns.
    assert "method forward: 1 partition(s)" in r.out
    assert "ops on the CPU: none" in r.out
    assert "arena B" in r.out and "MACs" in r.out and "S3 SIMD" in r.out
    assert "host-verified: .pte on ExecuTorch's runtime" in r.out and "vs the quantized PyTorch model" in r.out
    assert (d / "tiny.pte").read_bytes()[4:8] == b"ET12"
    doc = json.loads((d / "tiny.report.json").read_text())
    validate(doc)
    assert doc["model"] == "executorch_espnn.models:tiny_cnn"
    assert doc["pte"]["bytes"] == (d / "tiny.pte").stat().st_size
    part = doc["methods"]["forward"]["partitions"][0]
    assert part["payload"]["macs"] > 0 and part["payload"]["arena_bytes"] > 0
    assert part["payload"]["target"] == "esp32s3"
    v = doc["verification"]
    assert v["runtime"] == "pte" and v["passed"]
    # The .pte computes exactly what the device runtime computes ...
    assert v["device_runtime"]["outputs"][0]["max_abs_diff"] == 0 and v["device_runtime"]["passed"]
    # ... and stays close to the quantized PyTorch model (measured: 0 LSB).
    assert v["quantized_model"]["outputs"][0]["max_lsb"] <= 1 and v["quantized_model"]["tolerance_lsb"] is None


def test_calibration_and_accuracy_come_from_the_given_files(compiled, tiny_data):
    r, d = compiled
    doc = json.loads((d / "tiny.report.json").read_text())
    assert doc["calibration"] == {"source": str(tiny_data / "calib.npy"), "batches": 6}
    assert "no --calibration data" not in r.err
    a = doc["accuracy"]
    assert a["samples"] == 8 and a["runtime"] == "pte"
    assert a["float_top1"] == 1.0  # the labels are the float model's predictions
    assert a["max_lsb_error"] <= 1
    assert "accuracy on 8 labelled samples" in r.out and "delegate on host" in r.out


def test_stage_lines_on_stderr_and_no_progress_bar_off_a_terminal(compiled):
    r, _ = compiled
    assert "[1/6] loading model executorch_espnn.models:tiny_cnn" in r.err
    assert "\r" not in r.err  # no bar drawn into a captured stream


def test_cpu_fallback_lists_ops_with_reasons_and_strict_refuses(tmp_path):
    r = espnn("compile", f"{MODELS}:cumsum_island", "-o", tmp_path / "c.pte", "--target", "esp32", "-q")
    assert r.code == 0, r
    doc = json.loads((tmp_path / "c.report.json").read_text())
    validate(doc)
    m = doc["methods"]["forward"]
    assert len(m["partitions"]) == 2
    assert {p["payload"]["target"] for p in m["partitions"]} == {"esp32"}
    cumsum = [c for c in m["cpu_ops"] if c["op"].startswith("aten.cumsum")]
    assert cumsum and "no ESP-NN lowering" in cumsum[0]["reason"]
    assert "ops on the CPU" in r.out and "aten.cumsum" in r.out
    v = doc["verification"]
    assert v["passed"] and v["device_runtime"]["outputs"][0]["max_lsb"] <= 1
    assert v["quantized_model"]["outputs"][0]["max_lsb"] <= 3
    assert "[1/" not in r.err  # -q: no stage lines

    s = espnn("compile", f"{MODELS}:cumsum_island", "-o", tmp_path / "s.pte", "--strict")
    assert s.code == 3, s
    line = error_line(s)
    assert "--strict" in line and "cumsum" in line and "drop --strict" in line
    assert not (tmp_path / "s.pte").exists()


def test_random_calibration_is_warned(tmp_path):
    r = espnn("compile", f"{MODELS}:mlp", "-o", tmp_path / "m.pte")
    assert r.code == 0, r
    assert "espnn: warning: no --calibration data" in r.err
    doc = json.loads((tmp_path / "m.report.json").read_text())
    assert doc["calibration"]["source"] == "random" and doc["warnings"]


def test_data_function_calibration_and_qat(tmp_path):
    r = espnn("compile", f"{MODELS}:mlp", "-o", tmp_path / "q.pte", "--qat-epochs", "2",
              "--qat-data", f"{MODELS}:mlp_train_data", "--calibration", f"{MODELS}:unlabelled_batches",
              "--eval-data", f"{MODELS}:mlp_train_data")
    assert r.code == 0, r
    doc = json.loads((tmp_path / "q.report.json").read_text())
    validate(doc)
    assert doc["qat"]["epochs"] == 2 and len(doc["qat"]["mean_loss_per_epoch"]) == 2
    assert doc["calibration"]["batches"] == 3
    assert doc["accuracy"]["samples"] == 16
    assert "QAT" in r.err


def test_npy_folder_is_a_calibration_source(tmp_path):
    folder = tmp_path / "calib"
    folder.mkdir()
    for k in range(3):
        np.save(folder / f"s{k}.npy", np.random.default_rng(k).standard_normal((16,)).astype(np.float32))
    r = espnn("compile", f"{MODELS}:mlp", "-o", tmp_path / "f.pte", "--calibration", folder, "-q")
    assert r.code == 0, r
    assert json.loads((tmp_path / "f.report.json").read_text())["calibration"]["batches"] == 3


def test_a_pte_that_differs_from_the_device_runtime_exits_1(tmp_path, monkeypatch):
    from executorch_espnn.cli import compile_steps

    real = compile_steps.HostRunner.__call__

    def off_by_a_lot(self, inputs):
        return [o + 1.0 for o in real(self, inputs)]

    monkeypatch.setattr(compile_steps.HostRunner, "__call__", off_by_a_lot)
    r = espnn("compile", f"{MODELS}:mlp", "-o", tmp_path / "bad.pte", "-q")
    assert r.code == 1, r
    assert "HOST VERIFICATION FAILED" in r.out
    v = json.loads((tmp_path / "bad.report.json").read_text())["verification"]
    assert not v["passed"] and not v["device_runtime"]["passed"]
    assert v["device_runtime"]["outputs"][0]["differing_fraction"] == 1.0


def test_tolerance_lsb_makes_the_quantized_model_a_gate(tmp_path):
    # cumsum_island is measured 1 LSB from the quantized model (a float CPU island rounds differently).
    r = espnn("compile", f"{MODELS}:cumsum_island", "-o", tmp_path / "t.pte", "-q", "--tolerance-lsb", "0")
    assert r.code == 1, r
    v = json.loads((tmp_path / "t.report.json").read_text())["verification"]
    assert v["device_runtime"]["passed"] and not v["quantized_model"]["passed"]
    assert v["quantized_model"]["tolerance_lsb"] == 0


def test_without_a_host_kernel_the_lowered_program_is_verified_instead(tmp_path, monkeypatch):
    from executorch_espnn import runtime

    monkeypatch.setattr(runtime, "missing_host_kernels", lambda pte, method=None: ["quantized_decomposed::fake.out"])
    r = espnn("compile", f"{MODELS}:mlp", "-o", tmp_path / "e.pte", "-q")
    assert r.code == 0, r
    assert "lacks CPU kernel(s) quantized_decomposed::fake.out" in r.err
    assert "host-run (the .pte could not run on this host's ExecuTorch runtime): lowered program" in r.out
    doc = json.loads((tmp_path / "e.report.json").read_text())
    validate(doc)
    v = doc["verification"]
    assert v["runtime"] == "edge" and v["device_runtime"] is None and v["passed"]
    assert doc["host_missing_kernels"] == ["quantized_decomposed::fake.out"]


def test_labelled_npy_folder_classes_come_from_sub_folders(tmp_path):
    import torch

    from executorch_espnn.cli.data import load_dataset

    for k, name in enumerate(["cat", "dog"]):
        (tmp_path / "d" / name / "deeper").mkdir(parents=True)
        np.save(tmp_path / "d" / name / "a.npy", np.full((2, 16), k, np.float32))
        np.save(tmp_path / "d" / name / "deeper" / "b.npy", np.full((16,), k, np.float32))
    ds = load_dataset(str(tmp_path / "d"), (torch.zeros(1, 16),), "--eval-data", need_labels=True)
    assert ds.samples == 6
    assert [int(b.labels) for b in ds.batches] == [0, 0, 0, 1, 1, 1]
    assert all(float(b.inputs[0].mean()) == int(b.labels) for b in ds.batches)


def test_small_vit_is_one_partition_with_no_cpu_op(tmp_path):
    # Layer norm (LAYER_NORM), the attention matmuls (BATCH_MATMUL) and the head split/merge
    # are delegated (issue 18): nothing of the block is left on the CPU.
    r = espnn("compile", f"{MODELS}:vit_one_block", "-o", tmp_path / "vit.pte", "-q")
    assert r.code == 0, r
    doc = json.loads((tmp_path / "vit.report.json").read_text())
    validate(doc)
    m = doc["methods"]["forward"]
    assert len(m["partitions"]) == 1, m["partitions"]
    assert m["num_cpu_ops"] == 0, m["cpu_ops"]
    assert m["delegated_ops"]["BATCH_MATMUL"] == 2  # q @ k^T and attn @ v
    assert m["delegated_ops"]["LAYER_NORM"] == 3  # two in the block, the final one
    assert "1 partition(s)" in r.out and "0 CPU op(s)" in r.out and "host-verified" in r.out


def test_mobilenet_v2_is_one_partition_with_no_cpu_compute_op(tmp_path):
    r = espnn("compile", f"{MODELS}:mobilenet_v2_96", "-o", tmp_path / "mv2.pte", "-q")
    assert r.code == 0, r
    doc = json.loads((tmp_path / "mv2.report.json").read_text())
    validate(doc)
    m = doc["methods"]["forward"]
    assert len(m["partitions"]) == 1, m["partitions"]
    assert m["num_cpu_ops"] == 0, m["cpu_ops"]
    assert m["delegated_ops"]["CONV2D"] + m["delegated_ops"]["DEPTHWISE_CONV2D"] == 52
    assert "1 partition(s)" in r.out and "0 CPU op(s)" in r.out and "host-verified" in r.out


def test_int8_io_program_takes_and_returns_int8(tmp_path):
    """--int8-io: ExecuTorch's quantize_io_pass moves the input's quantize and the output's
    dequantize to the caller; the .pte's method takes and returns int8, the report gives their
    quantization, and host verification (converting at the boundary) still passes bit-exactly."""
    from executorch_espnn import runtime
    from executorch_espnn.pte_suite import method_input_specs

    pte = tmp_path / "mlp.pte"
    r = espnn("compile", f"{MODELS}:mlp", "-o", pte, "--int8-io", "-q")
    assert r.code == 0, r
    doc = json.loads((tmp_path / "mlp.report.json").read_text())
    validate(doc)
    io = doc["int8_io"]
    assert [(x["index"], x["dtype"]) for x in io["inputs"]] == [(0, "int8")]
    assert [(x["index"], x["dtype"]) for x in io["outputs"]] == [(0, "int8")]
    assert io["inputs"][0]["scale"] > 0 and -128 <= io["inputs"][0]["zero_point"] <= 127
    assert doc["verification"]["passed"]
    assert doc["verification"]["device_runtime"]["outputs"][0]["max_abs_diff"] == 0
    assert "QUANTIZE" not in doc["methods"]["forward"]["partitions"][0]["payload"]["xts3_ops"]
    ((shape, dtype),) = method_input_specs(pte.read_bytes())
    assert shape == (1, 16) and dtype == np.int8
    x = np.arange(-8, 8, dtype=np.int8).reshape(1, 16)
    (y,) = runtime.run_pte(pte.read_bytes(), [x])
    assert np.asarray(y).dtype == np.int8 and np.asarray(y).shape == (1, 4)
    # Without the option the same model takes float and records no int8_io.
    r = espnn("compile", f"{MODELS}:mlp", "-o", tmp_path / "f.pte", "-q")
    assert r.code == 0 and json.loads((tmp_path / "f.report.json").read_text())["int8_io"] is None


def test_int8_io_is_refused_when_the_first_op_stays_float_on_the_cpu(tmp_path):
    r = espnn("compile", f"{MODELS}:float_first", "-o", tmp_path / "c.pte", "--int8-io", "-q")
    assert r.code == 3, r
    assert "--int8-io:" in error_line(r) and "cannot take or return int8" in error_line(r)
    assert not (tmp_path / "c.pte").exists()
