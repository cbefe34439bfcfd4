"""The HTML report as a reader sees it: rendered in headless Chromium (driven
over its DevTools protocol, chromium_cdp.py) at a desktop width, a narrow
window and on paper (print media at an A4 page's width), with a layout check
run in the page (layout_check.js): nothing wider than its box, chart text
inside its chart and not on top of other text, charts that scale with the
page, labelled axes with the op names on them, the arena's lower bound
drawn, and no chart for a single partition.

Two reports: the default model (one partition) and conv | cumsum | conv (two
partitions, a CPU op between). Screenshots are left in the module's
temporary folder (`html_layout*/`) to look at.

Chromium is a test tool like the compilers (tests/support/toolchain.py): without it
the test skips and says so; CI installs it and sets
ESPNN_REQUIRE_TOOLCHAIN=1, which makes its absence a failure.
"""

import copy
import json

import pytest

from support import toolchain
from chromium_cdp import Chromium, find
from cli_harness import HERE, espnn

MODELS = HERE / "cli_models.py"
CHECK = (HERE / "layout_check.js").read_text()

DESKTOP, NARROW = 1280, 820  # CSS px
PRINT = 720  # an A4 page's width at 96 px/in less 1 cm margins
VIEWS = {"desktop": (DESKTOP, ""), "narrow": (NARROW, ""), "print": (PRINT, "print")}


@pytest.fixture(scope="session")
def chromium_exe():
    """Asked for first, so a missing browser skips before any compile."""
    exe = find()
    if exe is None:
        toolchain.skip_or_fail("Chromium not found on PATH (chromium, chromium-browser, google-chrome): the HTML "
                               "report's layout test renders the report in it (Debian: apt-get install chromium)")
    return exe


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    return tmp_path_factory.mktemp("html_layout")


@pytest.fixture(scope="module")
def browser(chromium_exe, shots):
    b = Chromium(chromium_exe, shots)
    yield b
    b.close()


@pytest.fixture(scope="module")
def reports(chromium_exe, compiled, shots):
    """kind -> (HTML path, report document): "single" is the main job's
    default model, "multi" the two-partition model with a CPU op between."""
    r, d = compiled
    assert r.code == 0, r
    r = espnn("compile", f"{MODELS}:cumsum_island", "-o", shots / "cumsum.pte", "--html", shots / "cumsum.html")
    assert r.code == 0, r
    return {"single": (d / "tiny.html", json.loads((d / "tiny.report.json").read_text())),
            "multi": (shots / "cumsum.html", json.loads((shots / "cumsum.report.json").read_text()))}


def _render(browser, path, view):
    width, media = VIEWS[view]
    browser.open(path)
    browser.viewport(width, media=media)
    return browser.evaluate(CHECK)


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("kind", ["single", "multi"])
def test_nothing_overflows_or_overlaps(browser, reports, shots, kind, view):
    path, _ = reports[kind]
    verdict = _render(browser, path, view)
    shot = browser.screenshot(shots / f"{kind}-{view}.png", VIEWS[view][0], VIEWS[view][1])
    where = f"{path} at {view} (screenshot {shot}):\n  "
    assert not verdict["problems"], where + "\n  ".join(verdict["problems"])
    if view != "narrow":
        # A desktop window and paper are wide enough for every table and
        # chart; on paper a scrolled-away part would be lost.
        assert not verdict["scrolling"], where + "\n  ".join(verdict["scrolling"])


@pytest.mark.parametrize("kind", ["single", "multi"])
def test_charts_scale_with_the_page_and_label_their_axes(browser, reports, kind):
    path, doc = reports[kind]
    parts = doc["methods"]["forward"]["partitions"]
    wide, narrow = (_render(browser, path, view)["charts"] for view in ("desktop", "narrow"))
    assert wide and len(wide) == len(narrow)
    for w, n in zip(wide, narrow):
        # Responsive: a viewBox, 100 % of the box it sits in at both widths.
        assert w["width_attr"] == "100%" and w["viewbox"], w
        for c in (w, n):
            assert abs(c["rendered_width"] - c["container_width"]) <= 1, c
        assert w["rendered_width"] > n["rendered_width"] + 200, (w, n)

    arena = [c for c in wide if "arena-chart" in c["classes"]]
    assert len(arena) == len(parts)
    for chart, p in zip(arena, parts):
        s = p["payload"]
        assert chart["titles"] and f"partition {p['index']}" in chart["titles"][0], chart
        # Both axes labelled: a byte scale with ticks from 0 up past the
        # arena, and the op axis naming every op (small models: each one)
        # in visible text, not only in hover tooltips.
        assert "bytes" in chart["axis_titles"] and any("execution order" in t for t in chart["axis_titles"]), chart
        ticks = [int(t.replace(",", "")) for t in chart["yticks"]]
        assert len(ticks) >= 3 and ticks[0] == 0 and ticks[-1] >= s["arena_bytes"], chart
        assert chart["xticks"] == [f"{st['index']} {st['op']}" for st in s["arena_timeline"]], chart
        # The arena and its lower bound drawn as labelled lines.
        assert chart["bound_lines"] == 1 and chart["arena_lines"] == 1, chart
        bound = f"{s['arena_lower_bound']:,} B"
        assert any("lower bound" in t and bound in t for t in chart["line_labels"]), chart


def test_one_partition_gets_a_sentence_not_a_one_bar_chart(browser, reports):
    single = _render(browser, reports["single"][0], "desktop")
    assert not [c for c in single["charts"] if "bar-chart" in c["classes"]]
    assert "One partition: " in single["text"]

    multi = _render(browser, reports["multi"][0], "desktop")
    bars = [c for c in multi["charts"] if "bar-chart" in c["classes"]]
    assert len(bars) == 1 and bars[0]["titles"] == ["MACs", "payload bytes"], bars
    assert bars[0]["xticks"].count("0") == 2, bars  # each panel's scale starts at 0


def _long_partition(doc: dict) -> dict:
    """The two-partition report with partition 0 stretched to 150 ops of long
    opcodes, its arena 4 % above its lower bound (the two lines nearly meet)
    and a CPU node with a long unbroken name: what a large model gives
    (a GRU keyword spotter has hundreds of ops)."""
    doc = copy.deepcopy(doc)
    m = doc["methods"]["forward"]
    s = m["partitions"][0]["payload"]
    names = ("DEPTHWISE_CONV2D", "FULLY_CONNECTED", "TRANSPOSE_CONV2D", "AVERAGE_POOL2D", "ADD")
    s["arena_timeline"] = [{"index": i, "op": names[i % len(names)], "live_bytes": 2000 + 5296 * (i % 7) // 6,
                            "plan_bytes": 7584 if i % 7 == 6 else 2300 + 5296 * (i % 7) // 6} for i in range(150)]
    s["arena_bytes"], s["arena_lower_bound"], s["arena_layer_bound"] = 7584, 7296, 9312
    m["cpu_ops"] = [{"node": "aten_gru_input_" + "layer_0_" * 8 + "default", "op": "aten.gru.input",
                     "reason": "no ESP-NN lowering for aten.gru.input"}]
    return doc


@pytest.mark.parametrize("view", list(VIEWS))
def test_a_long_partition_thins_its_op_labels_and_nothing_collides(browser, reports, shots, view):
    """No compile: the renderer's output for a made-up larger report."""
    from executorch_espnn.cli.html import render_html

    doc = _long_partition(reports["multi"][1])
    path = shots / "long.html"
    path.write_text(render_html(doc))
    verdict = _render(browser, path, view)
    shot = browser.screenshot(shots / f"long-{view}.png", VIEWS[view][0], VIEWS[view][1])
    where = f"{path} at {view} (screenshot {shot}):\n  "
    assert not verdict["problems"], where + "\n  ".join(verdict["problems"])
    if view == "print":
        assert not verdict["scrolling"], where + "\n  ".join(verdict["scrolling"])
    chart = next(c for c in verdict["charts"] if "arena-chart" in c["classes"])
    # Some ops labelled, at a regular stride starting at op 0, and the axis says so.
    labelled = [int(t.split()[0]) for t in chart["xticks"]]
    assert 10 <= len(labelled) < 150 and labelled[0] == 0, chart["xticks"]
    stride = labelled[1]
    assert labelled == list(range(0, 150, stride)), chart["xticks"]
    assert any(f"one op in {stride} labelled" in t for t in chart["axis_titles"]), chart
    assert any("planned arena 7,584 B" in t for t in chart["line_labels"]), chart
    assert any("lower bound 7,296 B" in t for t in chart["line_labels"]), chart
