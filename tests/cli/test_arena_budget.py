"""espnn compile --arena-budget / --schedule: the budget is met or refused
with the smallest arena reachable, sizes are parsed or refused as usage
errors, and the report carries the schedule columns (docs/report-schema.json)."""

import json

from cli_harness import error_line, espnn, validate


def smallest_arena(compiled) -> int:
    """The default compile (schedule auto, no budget) reaches the smallest peak."""
    _, d = compiled
    doc = json.loads((d / "tiny.report.json").read_text())
    return doc["methods"]["forward"]["partitions"][0]["payload"]["arena_bytes"]


def test_default_report_has_the_schedule_columns(compiled):
    r, d = compiled
    doc = json.loads((d / "tiny.report.json").read_text())
    validate(doc)
    assert (doc["schedule"], doc["arena_budget"]) == ("auto", None)
    s = doc["methods"]["forward"]["partitions"][0]["payload"]
    # The tiny model's feature maps set its layer-by-layer peak: auto fuses them.
    assert s["fused_regions"] and s["arena_bytes"] < s["arena_layer_bound"]
    assert s["schedule"].startswith(f"fused {len(s['fused_regions'])} region(s) [")
    assert "layer bound B" in r.out and f"schedule of partition 0: {s['schedule']};" in r.out
    html = (d / "tiny.html").read_text()
    assert "layer-by-layer bound B" in html and f"schedule: {s['schedule']}" in html


def test_a_budget_below_the_smallest_arena_is_refused_naming_it(compiled, tmp_path):
    smallest = smallest_arena(compiled)
    r = espnn("compile", "-o", tmp_path / "t.pte", "--arena-budget", str(smallest - 1))
    assert r.code == 3, r
    line = error_line(r)
    assert f"--arena-budget {smallest - 1:,} B cannot be met" in line
    assert f"smallest peak arena this partition reaches is {smallest:,} B" in line
    assert f"give --arena-budget {smallest:,} or more" in line
    assert not (tmp_path / "t.pte").exists()


def test_a_budget_at_the_smallest_arena_is_met(compiled, tmp_path):
    smallest = smallest_arena(compiled)
    r = espnn("compile", "-o", tmp_path / "t.pte", "--arena-budget", str(smallest), "--schedule", "auto")
    assert r.code == 0, r
    doc = json.loads((tmp_path / "t.report.json").read_text())
    validate(doc)
    assert doc["arena_budget"] == smallest
    assert doc["methods"]["forward"]["partitions"][0]["payload"]["arena_bytes"] <= smallest


def test_schedule_layer_keeps_every_op_on_whole_tensors(tmp_path):
    r = espnn("compile", "-o", tmp_path / "t.pte", "--schedule", "layer")
    assert r.code == 0, r
    doc = json.loads((tmp_path / "t.report.json").read_text())
    s = doc["methods"]["forward"]["partitions"][0]["payload"]
    assert doc["schedule"] == "layer"
    assert s["fused_regions"] == [] and s["schedule"] == "layer-by-layer"
    assert s["arena_lower_bound"] == s["arena_layer_bound"]
    assert "schedule: layer-by-layer" in r.out


def test_bad_sizes_and_schedules_are_usage_errors(tmp_path):
    r = espnn("compile", "-o", tmp_path / "t.pte", "--arena-budget", "lots")
    assert r.code == 2 and "not a size" in r.err and "320K" in r.err
    r = espnn("compile", "-o", tmp_path / "t.pte", "--schedule", "fastest")
    assert r.code == 2 and "invalid choice" in r.err
