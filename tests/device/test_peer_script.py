"""benchmarks/peer.py without a tool chain: how it reads the peer's console
and instruction counts, refuses incomplete arguments, and prints the
side-by-side table of a recorded result. The run itself (ESP-IDF + QEMU) is
tests/idf/test_peer_run.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import peer  # noqa: E402

CONSOLE = ("I (312) boot: something\n"
           "PEER_BEGIN models=2\n"
           "PEER model=person_detection status=pass runs=2 arena_used=84000 arena_head=76000 arena_tail=8000 "
           "arena_mem=internal model_bytes=300568\n"
           "PEER model=ds_cnn status=pass runs=1 arena_used=22000 arena_mem=internal\n"
           "ESPNN_END v=1 cases=2 passed=2 failed=0\n")
ICOUNT = "total 0 999\nmark 0 0x4200 100\nmark 0 0x4200 1100\nmark 0 0x4200 2000\nmark 0 0x4200 3000\n" \
         "mark 0 0x4200 5000\nmark 0 0x4200 5300\n"


def test_peer_console_and_marks_give_instructions_per_run():
    models = peer.parse_peer(CONSOLE, ICOUNT)
    assert list(models) == ["person_detection", "ds_cnn"]
    pd = models["person_detection"]
    assert pd["instructions"] == [1000, 1000] and pd["arena_used"] == 84000 and pd["arena_mem"] == "internal"
    assert pd["arena_head"] == 76000 and pd["model_bytes"] == 300568
    assert models["ds_cnn"]["instructions"] == [300]


@pytest.mark.parametrize("console, icount, message", [
    (CONSOLE, ICOUNT + "mark 0 0x4200 6000\n", "7 marks, 6 expected"),
    (CONSOLE, "\n".join(ICOUNT.splitlines()[:-2]) + "\n", "ds_cnn: 1 runs but 0 marks left"),
    (CONSOLE.replace("model=ds_cnn status=pass", "model=ds_cnn status=invoke_failed"), ICOUNT, "invoke_failed"),
    ("I (1) boot\n", "", "no PEER line"),
])
def test_an_incomplete_peer_measurement_is_refused(console, icount, message):
    with pytest.raises(ValueError, match=message):
        peer.parse_peer(console, icount)


@pytest.mark.parametrize("argv, message", [
    ([], "the peer's measurement is needed: --peer-console, --peer-icount, --peer-map"),
    (["--peer-console", "c.log", "--peer-icount", "i.txt"], "needed: --peer-map"),
    (["--from-json", "r.json", "--peer-console", "c.log"], "takes no --peer-console"),
    (["--peer-console", "nope.log", "--peer-icount", "i.txt", "--peer-map", "i.txt"], "nope.log does not exist"),
    (["--peer-console", "i.txt", "--peer-icount", "i.txt", "--peer-map", "i.txt", "--runner-build", "nope"],
     "nope does not exist"),
])
def test_argument_errors(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "i.txt").write_text(ICOUNT)
    with pytest.raises(SystemExit) as e:
        peer.main(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_a_peer_model_the_table_does_not_know_is_refused(tmp_path, capsys):
    (tmp_path / "c.log").write_text(CONSOLE.replace("model=ds_cnn", "model=resnet8"))
    (tmp_path / "i.txt").write_text(ICOUNT)
    with pytest.raises(SystemExit):
        peer.main(["--peer-console", str(tmp_path / "c.log"), "--peer-icount", str(tmp_path / "i.txt"),
                   "--peer-map", str(tmp_path / "i.txt")])
    assert "['resnet8']" in capsys.readouterr().err


def _recorded() -> dict:
    def ours(n, arena, scratch):
        return {"instructions": [n, n, n], "arena": arena, "scratch": scratch, "arena_mem": "internal"}

    return {"commit": "0123456789abcdef", "peer": {
        "source": "espressif/esp-tflite-micro@99f49e1", "image_size": 700_000, "static_dram": 30_000,
        "models": {"person_detection": {"instructions": [40_000_000, 40_000_002, 40_000_000], "arena_used": 84_000,
                                        "arena_head": 76_000, "arena_tail": 8_000, "arena_mem": "internal"},
                   "ds_cnn": {"instructions": [5_000_000], "arena_used": 22_000},
                   "ds_cnn@seed1": {"instructions": [5_000_000], "arena_used": 22_000}}},
        "ours": {"image_size": 600_000, "static_dram": 14_000, "cases": {
            "person_detection-auto-seed0": ours(30_000_000, 23_808, 16),
            "person_detection-layer-seed0": ours(29_000_000, 55_296, 16),
            "person_detection-auto-seed1": {**ours(30_000_000, 23_808, 16), "instructions": [30_000_000, 29_999_990,
                                                                                             30_000_000]},
            "ds_cnn-auto-seed0": ours(11_000_000, 8_640, 12_704),
            "ds_cnn-layer-seed0": ours(4_000_000, 16_000, 12_704),
            "ds_cnn-auto-seed1": ours(11_000_001, 8_640, 12_704)}}}


def test_table_of_a_recorded_result(tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_recorded()))
    assert peer.main(["--from-json", str(path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "guest instructions, not cycles" in lines[0] and "ours at 0123456789" in lines[0]
    assert "espressif/esp-tflite-micro@99f49e1" in lines[0]
    pd_peer = next(x for x in lines if x.startswith("person_detection") and "TFLite Micro" in x)
    # The peer's image less the flatbuffers it links (no model_bytes recorded here: the whole image).
    assert "40,000,000" in pd_peer and "84,000" in pd_peer and "700,000" in pd_peer and "30,000" in pd_peer
    pd_auto = next(x for x in lines if x.startswith("person_detection") and "schedule=auto" in x
                   and "vs" not in x and "30,000,000" in x)
    # 30 M / 40 M instructions; arena 23,808 + scratch 16.
    assert " 0.75 " in pd_auto and "23,824" in pd_auto and "600,000" in pd_auto and "14,000" in pd_auto
    assert "  person_detection: 84,000 B = head 76,000 + tail 8,000" in lines
    ds_layer = next(x for x in lines if x.startswith("ds_cnn") and "schedule=layer" in x)
    assert " 0.80 " in ds_layer and "28,704" in ds_layer
    # The seed table: equal for person detection, the difference shown for DS-CNN; the peer's two seeds too.
    seeds = lines[lines.index("instructions under two weight seeds (same graph):"):]
    assert any("person_detection" in x and "ours" in x and "+0 (+0.0000%)" in x and x.rstrip().endswith(" 10")
               for x in seeds)
    assert any("ds_cnn" in x and "ours" in x and "+1 (+0.0000%)" in x for x in seeds)
    assert any("ds_cnn" in x and "TFLite Micro" in x and "+0 (+0.0000%)" in x for x in seeds)
    # The spread between the timed runs of one program sits next to it (person detection's peer: 2).
    assert not any("person_detection" in x and "TFLite Micro" in x for x in seeds)


def test_size_figures_of_esp_idf_size_json2():
    layout = [{"name": "Flash Code", "parts": {".text": {"size": 9000}}},
              {"name": "DIRAM", "parts": {".text": {"size": 4000}, ".data": {"size": 300}, ".bss": {"size": 20}}},
              {"name": "IRAM", "parts": {".text": {"size": 1000}}}]
    text = json.dumps({"version": "1.2", "total_size": 14321, "layout": layout})
    assert peer.size_figures(text) == {"image_size": 14321, "static_dram": 320}


def test_peer_image_is_counted_without_the_models_it_links(capsys):
    result = _recorded()
    result["peer"]["models"]["person_detection"]["model_bytes"] = 300_000
    result["ours"]["cases"]["person_detection-auto-seed0"]["pte_bytes"] = 250_000
    lines = peer.render(result).splitlines()
    pd_peer = next(x for x in lines if x.startswith("person_detection") and "TFLite Micro" in x)
    assert " 300,000 " in pd_peer and " 400,000 " in pd_peer  # 700,000 - 300,000
    pd_auto = next(x for x in lines if x.startswith("person_detection") and "schedule=auto" in x and "23,808" in x)
    assert " 250,000 " in pd_auto and " 600,000 " in pd_auto


def test_documented_table_is_the_recorded_run():
    # docs/peer-comparison.md copies its figures from docs/peer-comparison.json: every measured row of the
    # script's table (instructions, arena + scratch, app image) is in the document's table, on one line.
    result = json.loads((REPO / "docs/peer-comparison.json").read_text())
    doc = (REPO / "docs/peer-comparison.md").read_text().splitlines()
    for row in peer.rows(result)[1:]:
        instructions, total, image = row[2], row[6], row[9]
        assert any(f"| {instructions} |" in line and f"| {total} |" in line.replace("**", "")
                   and f"| {image} |" in line for line in doc), row
    assert f"`{result['commit'][:7]}`" in "\n".join(doc)
