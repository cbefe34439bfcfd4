"""The default model's figures in README.md and docs/cli.md are those of a
fresh run of the README's command, `espnn compile -o build/tiny_cnn.pte`
(issue 29, item 6): one compile, every documented figure compared with it, so
that they cannot go stale again. When this fails after a deliberate change,
paste the fresh output into docs/cli.md and the figures into README.md."""

import json
import re

import pytest

from cli_harness import HERE, espnn

ROOT = HERE.parent.parent
CLI_MD = ROOT / "docs" / "cli.md"
README = ROOT / "README.md"
MARKER = "<!-- tests/cli/test_documented_figures.py compares this block with a fresh run -->"


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    d = tmp_path_factory.mktemp("readme")
    r = espnn("compile", "-o", "build/tiny_cnn.pte", cwd=d)  # the README's command, in a fresh folder
    assert r.code == 0, r
    doc = json.loads((d / "build" / "tiny_cnn.report.json").read_text())
    m = doc["methods"]["forward"]
    (part,) = m["partitions"]
    return r, doc, m, part["payload"]


def _flat(text: str) -> str:
    return " ".join(text.split())


def _int(figure: str) -> int:
    return int(figure.replace(",", ""))


def _documented_block() -> list[str]:
    text = CLI_MD.read_text()
    assert MARKER in text, "docs/cli.md lost the default model's output block"
    block = text.split(MARKER, 1)[1].split("```", 2)[1]
    return block.strip("\n").splitlines()


def _masked(line: str) -> str:
    """The line with its numbers masked: deviations in LSB may differ from
    host to host by a rounding step; the wording may not."""
    return re.sub(r"\d+(?:\.\d+)?", "N", line)


def test_cli_md_shows_what_the_default_compile_prints(fresh):
    r, *_ = fresh
    documented, got = _documented_block(), r.out.strip("\n").splitlines()
    assert len(documented) == len(got), "\n".join(got)
    for want, line in zip(documented, got):
        if line.startswith("host-verified:"):
            assert _masked(want) == _masked(line), line
        else:
            assert want == line, f"docs/cli.md says\n{want}\na fresh run prints\n{line}"


def test_cli_md_arena_budget_example_has_the_fresh_figures(fresh):
    _, _, _, payload = fresh
    text = _flat(CLI_MD.read_text())
    m = re.search(r"For the default model \(measured \d{4}-\d\d-\d\d: ([\d,]+) B layer by layer, ([\d,]+) B fused\)",
                  text)
    assert m, "docs/cli.md lost the default model's arena figures"
    assert (_int(m[1]), _int(m[2])) == (payload["arena_layer_bound"], payload["arena_bytes"])
    m = re.search(r"`espnn compile --arena-budget (\d+)` prints `espnn: error: --arena-budget ([\d,]+) B cannot be "
                  r"met: no schedule fits the arena budget of ([\d,]+) B: the smallest peak arena this partition "
                  r"reaches is ([\d,]+) B; give --arena-budget ([\d,]+) or more`", text)
    assert m, "docs/cli.md lost the --arena-budget error example"
    budget = int(m[1])
    assert _int(m[2]) == _int(m[3]) == budget < payload["arena_bytes"]  # an example that does fail
    assert _int(m[4]) == _int(m[5]) == payload["arena_bytes"]  # auto reaches the smallest peak


def test_readme_figures_are_the_fresh_ones(fresh):
    _, doc, m, payload = fresh
    text = _flat(README.read_text())
    found = re.search(r"one ESP-NN partition with (\d+) delegated ops \(\+(\d+) quantize/dequantize\) and (\d+) "
                      r"on the CPU, an activation arena of ([\d,]+) B \(its lower bound; ([\d,]+) B layer by "
                      r"layer\), a ([\d,]+)-byte payload and a ([\d,]+)-byte `.pte`", text)
    assert found, "README.md lost the default model's figures"
    assert [_int(x) for x in found.groups()] == [
        m["num_delegated_ops"], m["num_delegated_quant_ops"], m["num_cpu_ops"], payload["arena_bytes"],
        payload["arena_layer_bound"], m["totals"]["payload_bytes"], doc["pte"]["bytes"]]
    assert payload["arena_bytes"] == payload["arena_lower_bound"]  # "its lower bound"
