"""espnn report / run / bundle on the program the main job compiled, and
the HTML report."""

import json
import re

import numpy as np
import pytest

from cli_harness import error_line, espnn, validate


@pytest.fixture(scope="module")
def pte(compiled):
    r, d = compiled
    assert r.code == 0, r
    return d / "tiny.pte"


def test_report_reads_back_delegates_payloads_and_memory(pte, tmp_path):
    r = espnn("report", pte, "--json", tmp_path / "r.json", "--html", tmp_path / "r.html")
    assert r.code == 0, r
    doc = json.loads((tmp_path / "r.json").read_text())
    validate(doc)
    m = doc["methods"]["forward"]
    assert len(m["partitions"]) == 1 and m["num_cpu_ops"] == 0
    payload = m["partitions"][0]["payload"]
    assert payload["xts3_ops"]["CONV2D"] >= 1 and payload["target"] == "esp32s3"
    # Same payload as the compile report saw.
    compiled_doc = json.loads(pte.with_suffix(".report.json").read_text())
    compiled_payload = compiled_doc["methods"]["forward"]["partitions"][0]["payload"]
    for key in ("arena_bytes", "scratch_bytes", "macs", "xts3_ops", "num_ops"):
        assert payload[key] == compiled_payload[key], key
    assert m["planned_memory_bytes"] == compiled_doc["methods"]["forward"]["planned_memory_bytes"]
    assert "CONV2D" in r.out and "ops on the CPU: none" in r.out
    html = (tmp_path / "r.html").read_text()
    _self_contained(html)
    assert html.count("<svg") == 1 and "espnn report" in html  # one partition: its arena chart, no bar chart


def test_report_of_a_file_that_is_not_a_pte(tmp_path):
    bad = tmp_path / "x.pte"
    bad.write_bytes(b"not a program at all")
    r = espnn("report", bad)
    assert r.code == 2
    assert str(bad) in error_line(r) and "ExecuTorch" in error_line(r)
    assert espnn("report", tmp_path / "missing.pte").code == 2


def _self_contained(html: str) -> None:
    assert html.startswith("<!DOCTYPE html>")
    lowered = html.lower()
    for forbidden in ("<script", "src=", "href=", "http://", "https://", "@import", "url("):
        assert forbidden not in lowered, forbidden


def test_html_is_one_self_contained_page_with_its_charts(compiled):
    _, d = compiled
    html = (d / "tiny.html").read_text()
    _self_contained(html)
    # One partition: its arena chart; MACs and payload size in a sentence, not a one-bar chart.
    assert "<style>" in html and html.count("<svg") == 1
    assert "Arena occupancy over execution order" in html and "MACs and payload size" in html
    assert "One partition: " in html
    assert "host-verified" in html and "<polygon" in html


def test_run_saves_outputs_and_compares_with_a_reference(pte, tmp_path):
    x = np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = espnn("run", pte, "--input", tmp_path / "x.npy", "--save", tmp_path / "out")
    assert r.code == 0, r
    assert "output 0: shape [1, 10] float32" in r.out
    ref = np.load(tmp_path / "out" / "output_0.npy")
    assert espnn("run", pte, "-i", tmp_path / "x.npy", "-r", tmp_path / "out" / "output_0.npy").code == 0
    np.save(tmp_path / "off.npy", ref + 0.5)
    r = espnn("run", pte, "-i", tmp_path / "x.npy", "-r", tmp_path / "off.npy")
    assert r.code == 1 and "DIFFERS FROM the reference" in r.out and "max abs diff 0.5" in r.out
    assert espnn("run", pte, "-i", tmp_path / "x.npy", "-r", tmp_path / "off.npy", "--atol", "0.6").code == 0


def test_run_without_inputs_uses_random_ones(pte):
    r = espnn("run", pte)
    assert r.code == 0, r
    assert re.search(r"output 0: shape \[1, 10\]", r.out)


def test_run_input_errors(pte, tmp_path):
    np.save(tmp_path / "small.npy", np.zeros((1, 3, 8, 8), np.float32))
    r = espnn("run", pte, "-i", tmp_path / "small.npy")
    assert r.code == 2
    assert "small.npy" in error_line(r) and "(1, 3, 32, 32)" in error_line(r)
    r = espnn("run", pte, "-i", tmp_path / "small.npy", "-i", tmp_path / "small.npy")
    assert r.code == 2 and "takes 1 input(s)" in error_line(r)
    r = espnn("run", pte, "--method", "nope")
    assert r.code == 2 and "has no method 'nope'" in error_line(r)


def test_bundle_payloads_for_bundle_mode(pte, tmp_path):
    from executorch_espnn import bundle

    out = tmp_path / "b.bin"
    r = espnn("bundle", pte, "-o", out, "--cases", "2")
    assert r.code == 0, r
    cases = bundle.read_bundle(out.read_bytes())
    assert [c["name"] for c in cases] == ["tiny.forward.0.0", "tiny.forward.0.1"]
    # The model is the payload the .pte carries; the expected outputs are the
    # host runtime's on the bundled inputs.
    from executorch_espnn import _native
    from executorch_espnn.partition.report import pte_payloads

    (_, _, _, blob), = pte_payloads(pte.read_bytes())
    assert cases[0]["model"] == blob
    inputs = bundle.default_inputs(blob, seed=0)
    assert cases[0]["inputs"] == b"".join(x.tobytes() for x in inputs)
    assert cases[0]["expected"] == b"".join(np.asarray(o).tobytes() for o in _native.run(blob, inputs))


def test_bundle_pte_suite_for_pte_mode(pte, tmp_path):
    from executorch_espnn import pte_suite

    out = tmp_path / "s.xtsp"
    r = espnn("bundle", pte, "--kind", "pte", "-o", out, "--cases", "2")
    assert r.code == 0, r
    suite = pte_suite.read_suite(out.read_bytes())
    assert suite.pte == pte.read_bytes() and len(suite.cases) == 2 and suite.method == "forward"


def test_bundle_errors(pte, tmp_path):
    bad = tmp_path / "bad.pte"
    bad.write_bytes(b"x" * 64)
    r = espnn("bundle", bad, "-o", tmp_path / "o.bin")
    assert r.code == 2 and "bad.pte" in error_line(r)
    r = espnn("bundle", pte, pte, "--kind", "pte", "-o", tmp_path / "o.xtsp")
    assert r.code == 2 and "takes one .pte" in error_line(r)


def test_report_names_the_layers_off_the_s3_simd_path(tmp_path):
    """A KWS-style model with one dilated, strided conv: the summary, the JSON
    and the HTML say which layer misses ESP-NN's S3 SIMD routines, the routine
    it reaches instead and why (not only a share of MACs)."""
    from test_compile import MODELS

    r = espnn("compile", f"{MODELS}:offpath_kws", "-o", tmp_path / "kws.pte", "--json", tmp_path / "kws.json",
              "--html", tmp_path / "kws.html")
    assert r.code == 0, r
    line = next(x for x in r.out.splitlines() if "off the ESP32-S3 SIMD path" in x)
    assert "1 op(s)" in line, r.out
    row = next(x for x in r.out.splitlines() if "interpreter direct conv" in x)
    assert "stride > 1 on the dilated axis" in row and "conv2d" in row.lower() and "0%" in row, row

    doc = json.loads((tmp_path / "kws.json").read_text())
    ops = [o for m in doc["methods"].values() for p in m["partitions"] for o in p["payload"]["op_metrics"]]
    off = [o for o in ops if o["kernel"] == "interpreter direct conv"]
    assert len(off) == 1 and off[0]["s3_simd_macs"] == 0 and off[0]["macs"] > 0

    html = (tmp_path / "kws.html").read_text()
    assert "ESP-NN routine per op on the ESP32-S3" in html
    off_rows = re.findall(r"<tr class=off>(.*?)</tr>", html)
    assert len(off_rows) == 1 and "interpreter direct conv" in off_rows[0] and "dilated" in off_rows[0]
    assert html.count("esp_nn_conv_s8_mult8_1x1_esp32s3") + html.count("conv general asm") >= 1