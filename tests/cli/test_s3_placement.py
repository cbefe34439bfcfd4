"""The compile report's placement on an ESP32-S3 (executorch_espnn/s3_placement.py):
the runner's rule through the binding, the measured internal budget, and the
report section."""

import json
import re
from pathlib import Path

import pytest

from executorch_espnn import _native, s3_placement

REPO = Path(__file__).resolve().parents[2]
BUDGET = s3_placement.INTERNAL_BUDGET_BYTES


def placed(arena, scratch=0, persistent=0, pref="INTERNAL_FIRST", psram=True, budget=BUDGET):
    return {b["block"]: b for b in _native.predict_placement(arena, scratch, persistent, pref, psram, budget)}


def test_the_order_is_the_runners():
    # bundle_runner.cpp allocates by walking this table (espnn/placement.h).
    assert list(_native.RUNNER_ALLOCATION_ORDER) == ["arena", "scratch", "regions"]
    assert [b["block"] for b in _native.predict_placement(1, 1, 1, "INTERNAL_FIRST", True, 10)] == \
        ["arena", "scratch", "regions"]


def test_a_model_that_fits_stays_internal():
    # DS-CNN fused on the S3 build: arena 8,640 B, scratch 12,704 B (docs/device-evidence.json).
    p = placed(8640, 12704, 1024)
    assert [p[k]["memory"] for k in ("arena", "scratch", "regions")] == ["internal"] * 3
    assert p["scratch"]["internal_left_before"] == BUDGET - 8640
    assert p["regions"]["internal_left_before"] == BUDGET - 8640 - 12704


def test_an_arena_that_does_not_fit_goes_to_psram_and_leaves_the_budget_to_the_rest():
    # MobileNetV2-1.0-224: arena 301,056 B (the runner reported arena_mem=psram).
    p = placed(301056, 16, 2048)
    assert p["arena"]["memory"] == "psram"
    assert p["scratch"]["memory"] == "internal" and p["scratch"]["internal_left_before"] == BUDGET
    # Its S3 scratch, 414,784 B, does not fit either.
    assert placed(301056, 414784)["scratch"]["memory"] == "psram"


def test_the_boundary():
    assert placed(BUDGET)["arena"]["memory"] == "internal"
    assert placed(BUDGET + 16)["arena"]["memory"] == "psram"
    # A block that fits alone but not after the arena goes to PSRAM.
    p = placed(BUDGET - 100, 116)
    assert (p["arena"]["memory"], p["scratch"]["memory"]) == ("internal", "psram")


def test_other_preferences_follow_the_runtimes_fallback_order():
    assert placed(16, pref="PSRAM_FIRST")["arena"]["memory"] == "psram"
    assert placed(16, pref="PSRAM_FIRST", psram=False)["arena"]["memory"] == "internal"
    assert placed(BUDGET + 16, pref="INTERNAL_ONLY")["arena"]["memory"] == "no memory"
    assert placed(BUDGET + 16, psram=False)["arena"]["memory"] == "no memory"
    assert placed(0)["arena"]["memory"] == "none"
    with pytest.raises(ValueError, match="unknown memory preference"):
        placed(16, pref="FASTEST")


def test_the_preference_is_the_esp32s3_defaults():
    text = (REPO / "sdkconfig.defaults.esp32s3").read_text()
    chosen = re.findall(r"^CONFIG_ESPNN_MEMORY_(\w+)=y$", text, re.M)
    assert chosen == [s3_placement.MEMORY_SOURCE]
    assert re.search(r"^CONFIG_SPIRAM=y$", text, re.M)


def test_the_budget_is_the_measured_one():
    m = json.loads((REPO / "docs/s3-placement.json").read_text())["internal_budget"]
    assert m["largest_internal_arena"] == BUDGET
    assert m["smallest_psram_arena"] == BUDGET + 16


def test_compile_report_has_the_placement(compiled):
    from cli_harness import validate

    r, d = compiled
    doc = json.loads((d / "tiny.report.json").read_text())
    validate(doc)
    s = doc["s3_placement"]
    assert s["internal_budget_bytes"] == BUDGET and s["memory_source"] == "ESPNN_MEMORY_INTERNAL_FIRST"
    part = s["partitions"][0]
    payload = doc["methods"][part["method"]]["partitions"][part["partition"]]["payload"]
    arena = part["blocks"][0]
    assert arena == {"block": "arena", "bytes": payload["arena_bytes"], "memory": "internal",
                     "internal_left_before": BUDGET}
    assert f"arena {payload['arena_bytes']:,} B -> internal" in r.out


def test_no_placement_for_the_esp32():
    assert s3_placement.section({"forward": {"partitions": []}}, "esp32") is None
