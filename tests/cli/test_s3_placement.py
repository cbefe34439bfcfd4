"""The compile report's placement on an ESP32-S3 (executorch_espnn/s3_placement.py):
the runner's rule through the binding, the measured internal budget, and the
report section."""

import json
import re
from pathlib import Path

import pytest

from executorch_espnn import _native, s3_placement

REPO = Path(__file__).resolve().parents[2]
SMALL, BIG = s3_placement.INTERNAL_FREE_BLOCKS


def placed(arena, scratch=0, persistent=0, pref="INTERNAL_FIRST", psram=True, free=s3_placement.INTERNAL_FREE_BLOCKS):
    return {b["block"]: b for b in _native.predict_placement(arena, scratch, persistent, pref, psram, list(free))}


def test_the_order_is_the_runners():
    # bundle_runner.cpp allocates by walking this table (espnn/placement.h).
    assert list(_native.RUNNER_ALLOCATION_ORDER) == ["arena", "scratch", "regions"]
    assert [b["block"] for b in _native.predict_placement(1, 1, 1, "INTERNAL_FIRST", True, [10])] == \
        ["arena", "scratch", "regions"]


def test_a_model_that_fits_stays_internal():
    # DS-CNN fused on the S3 build: arena 8,640 B, scratch 12,704 B, both internal (docs/device-evidence.json).
    p = placed(8640, 12704, 1024)
    assert [p[k]["memory"] for k in ("arena", "scratch", "regions")] == ["internal"] * 3
    assert p["arena"]["largest_internal_before"] == BIG
    # Each block takes the first free block it fits in, as heap_caps tries its heaps smallest first.
    assert placed(8640, 12704, free=[20000, BIG])["regions"]["largest_internal_before"] == BIG - 12704


def test_an_arena_that_does_not_fit_goes_to_psram_and_leaves_internal_ram_to_the_rest():
    # MobileNetV2-1.0-224: arena 301,056 B (the runner reported arena_mem=psram).
    p = placed(301056, 16, 2048)
    assert p["arena"]["memory"] == "psram"
    assert p["scratch"]["memory"] == "internal" and p["scratch"]["largest_internal_before"] == BIG
    # Its S3 scratch, 414,784 B, does not fit either.
    assert placed(301056, 414784)["scratch"]["memory"] == "psram"


def test_the_boundaries():
    # The runs of docs/s3-placement.json: one block up to BIG; after an arena in
    # the big block, a second one up to SMALL.
    assert placed(BIG)["arena"]["memory"] == "internal"
    assert placed(BIG + 16)["arena"]["memory"] == "psram"
    assert placed(277616, SMALL)["scratch"]["memory"] == "internal"
    p = placed(277616, SMALL + 16)
    assert (p["arena"]["memory"], p["scratch"]["memory"]) == ("internal", "psram")
    assert p["scratch"]["largest_internal_before"] == max(SMALL, BIG - 277616)
    # A small arena takes the small block first and leaves the big one whole.
    p = placed(SMALL, BIG)
    assert (p["arena"]["memory"], p["scratch"]["memory"]) == ("internal", "internal")


def test_other_preferences_follow_the_runtimes_fallback_order():
    assert placed(16, pref="PSRAM_FIRST")["arena"]["memory"] == "psram"
    assert placed(16, pref="PSRAM_FIRST", psram=False)["arena"]["memory"] == "internal"
    assert placed(BIG + 16, pref="INTERNAL_ONLY")["arena"]["memory"] == "no memory"
    assert placed(BIG + 16, psram=False)["arena"]["memory"] == "no memory"
    assert placed(0)["arena"]["memory"] == "none"
    with pytest.raises(ValueError, match="unknown memory preference"):
        placed(16, pref="FASTEST")


def test_the_preference_is_the_esp32s3_defaults():
    text = (REPO / "sdkconfig.defaults.esp32s3").read_text()
    chosen = re.findall(r"^CONFIG_ESPNN_MEMORY_(\w+)=y$", text, re.M)
    assert chosen == [s3_placement.MEMORY_SOURCE]
    assert re.search(r"^CONFIG_SPIRAM=y$", text, re.M)


def test_the_free_blocks_are_the_measured_ones():
    m = json.loads((REPO / "docs/s3-placement.json").read_text())["internal_free_blocks"]
    assert m["one_block"]["largest_internal"] == BIG and m["one_block"]["smallest_psram"] == BIG + 16
    second = m["after_an_arena_in_the_big_block"]
    assert second["largest_internal"] == SMALL and second["smallest_psram"] == SMALL + 16
    assert second["arena"] > BIG - SMALL  # the big block could not hold the second one


def test_compile_report_has_the_placement(compiled):
    from cli_harness import validate

    r, d = compiled
    doc = json.loads((d / "tiny.report.json").read_text())
    validate(doc)
    s = doc["s3_placement"]
    assert s["internal_free_blocks"] == [SMALL, BIG] and s["memory_source"] == "ESPNN_MEMORY_INTERNAL_FIRST"
    part = s["partitions"][0]
    payload = doc["methods"][part["method"]]["partitions"][part["partition"]]["payload"]
    arena = part["blocks"][0]
    assert arena == {"block": "arena", "bytes": payload["arena_bytes"], "memory": "internal",
                     "largest_internal_before": BIG}
    assert f"forward partition 0: arena {payload['arena_bytes']:,} B -> internal" in r.out


def test_no_placement_for_the_esp32():
    assert s3_placement.section({"forward": {"partitions": []}}, "esp32") is None
