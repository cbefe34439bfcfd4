"""Progress feedback: a bar on a terminal only, plain when tqdm is absent."""

import builtins
import io

from executorch_espnn.cli.progress import Stages, progress


class FakeTty(io.StringIO):
    def isatty(self):
        return True


def test_no_bar_when_stderr_is_not_a_terminal():
    stream = io.StringIO()
    assert list(progress(range(5), 5, "calibrating", stream)) == list(range(5))
    assert stream.getvalue() == ""


def test_plain_bar_on_a_terminal_without_tqdm(monkeypatch):
    real_import = builtins.__import__

    def no_tqdm(name, *args, **kwargs):
        if name == "tqdm":
            raise ImportError("no tqdm")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tqdm)
    stream = FakeTty()
    assert list(progress(range(4), 4, "calibrating", stream)) == list(range(4))
    text = stream.getvalue()
    assert "calibrating [" in text and "4/4" in text and text.endswith("\r")  # the line is cleared after


def test_tqdm_bar_on_a_terminal_when_installed():
    import pytest

    pytest.importorskip("tqdm")
    stream = FakeTty()
    assert list(progress(range(3), 3, "calibrating", stream)) == [0, 1, 2]
    assert "calibrating" in stream.getvalue()


def test_stage_lines_count_and_quiet():
    s = io.StringIO()
    stages = Stages(2, stream=s)
    stages("loading")
    stages("lowering")
    assert s.getvalue() == "[1/2] loading\n[2/2] lowering\n"
    q = io.StringIO()
    Stages(2, quiet=True, stream=q)("loading")
    assert q.getvalue() == ""
