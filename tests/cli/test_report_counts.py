"""What the reports count and say (issue 29, item 4): one definition of a
delegated op and of a CPU op (partition/op_kinds.py) for compile, report,
--strict and the JSON; CPU ops grouped by op and reason; ExecuTorch's planned
memory checked against the target's internal RAM (targets.py); no ESP32-S3
SIMD wording for another chip; top-1 only for a classifier's logits."""

import json
import re

import pytest

from cli_harness import error_line, espnn, validate
from test_compile import MODELS

COUNTS = ("delegated_ops", "num_delegated_ops", "num_delegated_quant_ops", "num_cpu_ops", "num_cpu_quant_ops",
          "planned_memory_over_internal_ram")


@pytest.fixture(scope="module")
def mix(tmp_path_factory):
    """cli_models.cpu_mix for the ESP32, compiled once: CPU ops with getitems,
    an aliased view, quantize/dequantize on the CPU, twelve cumsums, 1 MB of
    planned memory, two outputs. Then `espnn report` of its .pte."""
    d = tmp_path_factory.mktemp("mix")
    r = espnn("compile", f"{MODELS}:cpu_mix", "-o", d / "mix.pte", "--target", "esp32", "--html", d / "mix.html")
    assert r.code == 0, r
    rep = espnn("report", d / "mix.pte", "--json", d / "report.json")
    assert rep.code == 0, rep
    docs = {name: json.loads((d / f).read_text()) for name, f in (("compile", "mix.report.json"),
                                                                   ("report", "report.json"))}
    for doc in docs.values():
        validate(doc)
    return r, rep, docs, d


def test_compile_report_and_strict_count_the_same_ops(mix, tmp_path):
    r, rep, docs, d = mix
    c, p = (docs[k]["methods"]["forward"] for k in ("compile", "report"))
    assert {k: c[k] for k in COUNTS} == {k: p[k] for k in COUNTS}
    # Delegated ops are what the delegates run, quantize/dequantize apart (each
    # partition's NCHW float input is quantized straight into NHWC and its NHWC
    # result dequantized straight into the NCHW output: no TRANSPOSE).
    assert c["delegated_ops"] == {"AVG_POOL2D": 1, "CONV2D": 2} and c["num_delegated_ops"] == 3
    assert c["num_delegated_quant_ops"] == 4
    assert sum(part["num_delegated_ops"] for part in c["partitions"]) == 3
    # CPU ops are kernel calls: no getitem of sort/topk, no view ExecuTorch aliases.
    ops = [o["op"] for o in c["cpu_ops"]]
    assert "operator.getitem" not in ops and "aten.view_copy.default" not in ops
    assert len(c["cpu_ops"]) == len(p["cpu_ops"]) == c["num_cpu_ops"] + c["num_cpu_quant_ops"]
    assert c["num_cpu_quant_ops"] == 2 and {o["kind"] for o in c["cpu_ops"] if o["op"].startswith("quantized")} == {
        "quantize"}
    n, q = c["num_cpu_ops"], c["num_cpu_quant_ops"]
    head = f"3 delegated op(s) (+4 quantize/dequantize), {n} CPU op(s) (+{q} quantize/dequantize)"
    assert head in r.out and head in rep.out

    s = espnn("compile", f"{MODELS}:cpu_mix", "-o", tmp_path / "s.pte", "--strict", "-q")
    assert s.code == 3, s
    assert f"--strict: {n} op(s) (+{q} quantize/dequantize) would run on the CPU" in error_line(s)


def test_cpu_ops_are_grouped_with_counts_and_listed_with_verbose(mix):
    r, rep, docs, d = mix
    m = docs["compile"]["methods"]["forward"]
    cumsums = [g for g in m["cpu_op_groups"] if g["op"] == "aten.cumsum.default"]
    assert cumsums == [{"op": "aten.cumsum.default", "reason": "no ESP-NN lowering for aten.cumsum.default",
                        "kind": "compute", "count": 12, "first_node": "aten_cumsum_default"}]
    assert sum(g["count"] for g in m["cpu_op_groups"]) == len(m["cpu_ops"])
    assert re.search(r"^\s+12\s+aten\.cumsum\.default\s+no ESP-NN lowering", r.out, re.M), r.out
    # One line per group, not per op: the twelfth cumsum's node is not printed ...
    assert "aten_cumsum_default_11" not in r.out and "aten_cumsum_default_11" in json.dumps(m["cpu_ops"])
    html = (d / "mix.html").read_text()
    assert "<td class=n>12</td><td>aten.cumsum.default</td>" in html and "aten_cumsum_default_11" not in html
    # ... and --verbose lists every node (report: the .pte's kernel calls).
    report = docs["report"]["methods"]["forward"]
    calls = len(report["cpu_ops"])

    def named(out):
        return sum(bool(re.search(rf"\bkernel_call_{i}\b", out)) for i in range(calls))

    assert named(rep.out) == len(report["cpu_op_groups"]) < calls  # each group's first node only
    verbose = espnn("report", d / "mix.pte", "--verbose")
    assert verbose.code == 0, verbose
    assert named(verbose.out) == calls


def test_planned_memory_above_the_targets_internal_ram_is_flagged(mix, compiled):
    r, rep, docs, _ = mix
    for doc in docs.values():
        assert doc["internal_ram"]["chip"] == "ESP32" and doc["internal_ram"]["bytes"] == 320 * 1024
        m = doc["methods"]["forward"]
        assert m["planned_memory_bytes"] > 320 * 1024 and m["planned_memory_over_internal_ram"] is True
    for result in (r, rep):
        assert "(MORE THAN the ESP32's 327,680 B of internal data RAM)" in result.out
        assert re.search(r"espnn: warning: method forward: ExecuTorch's planned memory, [\d,]+ B, is more than "
                         r"the ESP32's 327,680 B", result.err), result.err
    assert any("planned memory" in w for w in docs["compile"]["warnings"] + docs["report"]["warnings"])
    # The default model fits the ESP32-S3 (and is not flagged).
    small = json.loads((compiled[1] / "tiny.report.json").read_text())
    assert small["internal_ram"]["chip"] == "ESP32-S3"
    assert small["methods"]["forward"]["planned_memory_over_internal_ram"] is False
    assert "MORE THAN" not in compiled[0].out and "planned memory" not in compiled[0].err


def test_the_internal_ram_figures_are_per_target():
    from executorch_espnn.targets import TARGETS, planned_memory_excess, planned_memory_over

    assert TARGETS["esp32"].internal_data_ram_bytes == 327_680  # ESP-IDF Memory Types: 320 KB of DRAM
    assert TARGETS["esp32s3"].internal_data_ram_bytes == 491_520  # SOC_DRAM_LOW..SOC_DRAM_HIGH
    assert planned_memory_over(400_000, "esp32") is True and planned_memory_over(400_000, "esp32s3") is False
    assert planned_memory_over(None, "esp32") is None and planned_memory_over(400_000, None) is None
    assert planned_memory_excess(400_000, "esp32s3") is None
    assert "ESP32's 327,680 B" in planned_memory_excess(400_000, "esp32")


def test_an_esp32_program_has_no_s3_simd_wording(mix, compiled):
    r, rep, docs, d = mix
    for out in (r.out, rep.out):
        assert "SIMD" not in out.replace("ESP32-S3 SIMD shares do not apply", "")
        assert "on the ESP32: ESP-NN's generic C kernels" in out
    html = (d / "mix.html").read_text()
    assert "ESP-NN routine per op on the ESP32-S3" not in html and "generic C kernels" in html
    # The S3's column and list stay for an ESP32-S3 program.
    assert "S3 SIMD" in compiled[0].out and "generic C kernels" not in compiled[0].out


def test_top1_only_for_a_classifiers_logits(mix, compiled, tmp_path):
    r, _, docs, _ = mix
    assert docs["compile"]["verification"]["quantized_model"]["top1_agreement"] is None  # two outputs
    assert "top-1" not in r.out
    ae = espnn("compile", f"{MODELS}:autoencoder", "-o", tmp_path / "ae.pte", "-q")
    assert ae.code == 0, ae
    doc = json.loads((tmp_path / "ae.report.json").read_text())
    validate(doc)
    assert doc["verification"]["quantized_model"]["top1_agreement"] is None and "top-1" not in ae.out
    # A classifier keeps it.
    assert json.loads((compiled[1] / "tiny.report.json").read_text())["verification"]["quantized_model"][
        "top1_agreement"] == 1.0
    assert "top-1 agrees 100%" in compiled[0].out


@pytest.mark.parametrize("shapes, inputs, expected", [
    ([(1, 10)], [(1, 3, 32, 32)], True),
    ([(10,)], [(4,)], True),
    ([(1, 1)], [(1, 16)], False),  # one logit: argmax is always 0
    ([(1, 10), (1, 4)], [(1, 16)], False),  # a detector's heads
    ([(1, 64)], [(1, 64)], False),  # an autoencoder's reconstruction
    ([(1, 4, 8, 8)], [(1, 3, 8, 8)], False),  # a feature map
])
def test_classifier_shaped(shapes, inputs, expected):
    import torch

    from executorch_espnn.cli.compile_steps import classifier_shaped

    assert classifier_shaped([torch.zeros(s) for s in shapes], [torch.zeros(s) for s in inputs]) is expected


def test_reasons_are_grouped_with_node_names_generalized():
    import torch

    from executorch_espnn.partition.report import _name_generalizer

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x + 1) * 2 + 3

    graph = torch.fx.symbolic_trace(M()).graph
    assert {n.name for n in graph.nodes} >= {"x", "add", "add_1", "mul"}
    generalize = _name_generalizer(graph)
    assert generalize("input add_1 of mul is not dequantized") == "input <node> of mul is not dequantized"
    assert generalize("input x of add_1 (placeholder)") == "input x of <node> (placeholder)"  # a word stays
    assert generalize("no ESP-NN lowering for aten.add_1.default") == "no ESP-NN lowering for aten.add_1.default"
    assert generalize(None) is None
