"""benchmarks/emulated.run_counted without QEMU: a fake tools/qemu-esp that
prints a console and writes an instruction-count file. A crash, a timeout or
an empty session must raise, never turn into an empty figure table."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import emulated  # noqa: E402

BEGIN = "ESPNN_BEGIN v=1 platform=esp32s3 cases={n}\n"
PASS = "ESPNN_RESULT v=1 case={name} status=pass runs=2\n"
END = "ESPNN_END v=1 cases={n} passed={n} failed=0\n"


def _fake_tool(tmp_path: Path, console: str, exit_code: int, marks: list[int] | None) -> Path:
    tool = tmp_path / "fake-qemu-esp"
    tool.write_text(
        "import sys\n"
        "args = sys.argv[1:]\n"
        "out = args[args.index('--icount') + 1]\n"
        f"marks = {marks!r}\n"
        "if marks is not None:\n"
        "    open(out, 'w').write(''.join(f'mark 0 at {m}\\n' for m in marks))\n"
        f"sys.stdout.write({console!r})\n"
        f"sys.exit({exit_code})\n")
    return tool


def _run(tmp_path, monkeypatch, console, exit_code=0, marks=None):
    monkeypatch.setattr(emulated, "QEMU_ESP", _fake_tool(tmp_path, console, exit_code, marks))
    build = tmp_path / "build-s3"
    build.mkdir(exist_ok=True)
    return emulated.run_counted("qemu", build, tmp_path / "ops.xtsb", tmp_path, timeout=60)


def test_instructions_per_timed_run_from_marker_pairs(tmp_path, monkeypatch):
    console = BEGIN.format(n=2) + PASS.format(name="a") + PASS.format(name="b") + END.format(n=2)
    run, per_case = _run(tmp_path, monkeypatch, console, marks=[100, 150, 200, 260, 300, 400, 500, 520])
    assert run.ok and per_case == {"a": [50, 60], "b": [100, 20]}


@pytest.mark.parametrize("exit_code", [2, 3, 4])
def test_a_failed_qemu_run_raises(tmp_path, monkeypatch, exit_code):
    with pytest.raises(RuntimeError, match=f"qemu-esp exit {exit_code}"):
        _run(tmp_path, monkeypatch, "Guru Meditation Error\n", exit_code=exit_code, marks=[])


def test_an_empty_session_raises(tmp_path, monkeypatch):
    with pytest.raises(RuntimeError, match="reported no case"):
        _run(tmp_path, monkeypatch, BEGIN.format(n=0) + END.format(n=0), marks=[])


def test_missing_counter_output_raises(tmp_path, monkeypatch):
    console = BEGIN.format(n=1) + PASS.format(name="a") + END.format(n=1)
    with pytest.raises(RuntimeError, match="instruction counter wrote nothing"):
        _run(tmp_path, monkeypatch, console, marks=None)


def test_marker_count_must_match_the_result_lines(tmp_path, monkeypatch):
    console = BEGIN.format(n=1) + PASS.format(name="a") + END.format(n=1)
    with pytest.raises(RuntimeError, match="3 marker hits, 4 expected"):
        _run(tmp_path, monkeypatch, console, marks=[1, 2, 3])
