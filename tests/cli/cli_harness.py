"""Helpers of the espnn CLI tests: run the command in-process (torch is
imported once), pick its error line, validate reports against the schema.
(A module of its own, not conftest: every test directory has a conftest and
`from conftest import` would depend on which one was imported first.)"""

import contextlib
import io
import json
from pathlib import Path

HERE = Path(__file__).parent
SCHEMA = HERE.parent.parent / "docs" / "report-schema.json"


class Result:
    def __init__(self, code, out, err):
        self.code, self.out, self.err = code, out, err

    def __repr__(self):
        return f"Result(code={self.code}, out={self.out[-2000:]!r}, err={self.err[-2000:]!r})"


def espnn(*args, cwd=None) -> Result:
    """Runs `espnn args...` in-process; returns exit code, stdout, stderr."""
    import os

    from executorch_espnn.cli import main

    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as e:  # argparse
                code = e.code
    finally:
        os.chdir(old)
    return Result(code, out.getvalue(), err.getvalue())


def error_line(result: Result) -> str:
    """The one `espnn: error:` line of a failed command (asserts there is exactly one)."""
    lines = [ln for ln in result.err.splitlines() if ln.startswith("espnn: ")]
    errors = [ln for ln in lines if ln.startswith(("espnn: error:", "espnn: internal error:"))]
    assert len(errors) == 1, result
    return errors[0]


def validate(doc: dict) -> None:
    """Validates a report against docs/report-schema.json. Without jsonschema
    (the `test` extra) only test_schema.py is skipped; the callers' own
    assertions still run."""
    try:
        import jsonschema
    except ImportError:
        return
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)
