"""Corrupted .pte files (tests/hardening/data): the check every loader runs before
ExecuTorch's (espnn::pte::CheckProgram, through _native.check_pte) and what
users see.

data/ holds the two files an outside fuzz run produced by mutating
data/original.pte (a fully delegated CNN, executorch 1.5.1):
  mutated-abort.pte  the backend id's bytes are not UTF-8: ExecuTorch logs
                     "Backend <id> is not registered" and its Python binding
                     aborts the process decoding that line (SIGABRT);
  mutated-segv.pte   the delegate entry lost its `processed` (and
                     compile_specs) fields: ExecuTorch's BackendDelegate::Init
                     dereferences the missing `processed` (SIGSEGV), even
                     after Verification.InternalConsistency.
Whatever could crash runs in a subprocess, so a regression fails a test
instead of killing the test run.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("executorch")

import pte_json  # noqa: E402

from executorch_espnn import _native  # noqa: E402
from executorch_espnn.pte_check import InvalidProgramError, check_pte  # noqa: E402

DATA = Path(__file__).parent / "data"
ORIGINAL = DATA / "original.pte"
ABORT = DATA / "mutated-abort.pte"
SEGV = DATA / "mutated-segv.pte"


@pytest.fixture(scope="module")
def inline_doc() -> dict:
    """original.pte as a standalone (INLINE payload) program's JSON."""
    return pte_json.inline_program(ORIGINAL.read_bytes())


def rejection(pte: bytes) -> str:
    with pytest.raises(ValueError) as e:
        _native.check_pte(pte)
    msg = str(e.value)
    assert msg and "\n" not in msg and msg.isascii() and msg.isprintable(), msg
    return msg


def python(code: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------- the two files
def test_the_two_files_are_rejected_naming_the_field():
    assert "delegate 0: the backend id 'EspN????kend' has a byte 0xea that is not printable ASCII" in rejection(
        ABORT.read_bytes())
    assert "method 0 ('forward') delegate 0: no processed-data reference" in rejection(SEGV.read_bytes())
    check_pte(ORIGINAL.read_bytes())


def test_mutated_segv_lost_the_processed_field():
    """Which field does it: mutated-segv.pte's BackendDelegate vtable (id,
    processed, compile_specs at 0x146) has its processed and compile_specs
    slots (0x14c, 0x14e) cleared; clearing the processed slot alone is
    refused by the check, clearing compile_specs alone is not (ExecuTorch
    1.5.1 handles that one itself; test_executorch_crashes_without_the_check
    shows which of these make it crash)."""
    original = ORIGINAL.read_bytes()
    segv = SEGV.read_bytes()
    assert original[0x14c:0x150] == b"\x08\x00\x04\x00" and segv[0x14c:0x150] == b"\x00\x00\x00\x00"
    no_processed = bytearray(original)
    no_processed[0x14c] = 0
    no_specs = bytearray(original)
    no_specs[0x14e] = 0
    assert "delegate 0: no processed-data reference" in rejection(bytes(no_processed))
    check_pte(bytes(no_specs))


# Programs ExecuTorch 1.5.1's own loader cannot survive (docs/runtime.md,
# report 1): the edit, and how the process dies in Program.load_method after
# full verification. Each is one rule of the check.
CRASHES = {
    "no processed": (lambda d: _delegate(d).pop("processed"), -11),
    "no inline data list": (lambda d: d.pop("backend_delegate_data"), -11),
    "inline entry without bytes": (lambda d: d["backend_delegate_data"][0].pop("data"), -11),
    "compile spec without value": (lambda d: _delegate(d).update(compile_specs=[{"key": "k"}]), -11),
    "no method name": (lambda d: _plan(d).pop("name"), -6),
}


def test_executorch_crashes_without_the_check(inline_doc, tmp_path):
    """ExecuTorch's loader alone (full verification, no check of ours) on
    each edit of CRASHES, one forked child per program after one import:
    each dies as recorded. This is what the check protects from; when a
    later ExecuTorch refuses one cleanly, this fails and docs/runtime.md's
    report is to be revisited. The valid control program loads."""
    paths = {"control": tmp_path / "control.pte"}
    paths["control"].write_bytes(pte_json.to_pte(inline_doc))
    for name, (change, _) in CRASHES.items():
        doc = copy.deepcopy(inline_doc)
        change(doc)
        paths[name] = tmp_path / (name.replace(" ", "_") + ".pte")
        paths[name].write_bytes(pte_json.to_pte(doc))
        with pytest.raises(ValueError):
            _native.check_pte(paths[name].read_bytes())
    code = ("import os, sys\nimport executorch_espnn\nfrom executorch.runtime import Runtime, Verification\n"
            "rt = Runtime.get()\n"
            f"for name, path in {[(n, str(p)) for n, p in paths.items()]!r}:\n"
            "    pid = os.fork()\n"
            "    if pid == 0:\n"
            "        p = rt.load_program(open(path, 'rb').read(), verification=Verification.InternalConsistency)\n"
            "        p.load_method('forward')\n"
            "        os._exit(0)\n"
            "    _, status = os.waitpid(pid, 0)\n"
            "    print(name, -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status), flush=True)\n")
    r = python(code)
    got = dict(line.rsplit(" ", 1) for line in r.stdout.splitlines())
    assert got == {"control": "0", **{n: str(sig) for n, (_, sig) in CRASHES.items()}}, (got, r.stderr[-2000:])


def test_run_pte_raises_instead_of_crashing():
    code = ("import torch\nfrom executorch_espnn.runtime import run_pte, InvalidProgramError\n"
            f"for f in [{str(ABORT)!r}, {str(SEGV)!r}]:\n"
            "    try:\n        run_pte(f, [torch.zeros(1, 3, 12, 12)])\n"
            "    except InvalidProgramError as e:\n        print('raised:', e)\n"
            "    for pte in [open(f, 'rb').read()]:\n"
            "        try:\n            run_pte(pte, [torch.zeros(1, 3, 12, 12)])\n"
            "        except ValueError as e:\n            print('raised:', e)\n")
    r = python(code)
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("raised:")]
    assert len(lines) == 4, r.stdout
    assert lines[0].startswith(f"raised: {ABORT}: method 0 ('forward') delegate 0: the backend id"), lines
    assert lines[2].startswith(f"raised: {SEGV}: method 0 ('forward') delegate 0: no processed-data"), lines
    assert lines[3].startswith("raised: the .pte: method 0"), lines


def espnn_error(*args: str) -> tuple[int, str]:
    """Exit code and the one `espnn:` line of a command run in a subprocess."""
    r = subprocess.run([sys.executable, "-m", "executorch_espnn", *args], capture_output=True, text=True,
                       timeout=300)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("espnn: ")]
    assert len(errors) == 1, (r.returncode, r.stderr[-3000:])
    return r.returncode, errors[0]


@pytest.mark.parametrize("path", [ABORT, SEGV], ids=["abort", "segv"])
def test_espnn_run_exits_2_with_one_line(path):
    code, line = espnn_error("run", str(path))
    assert code == 2 and line.startswith(f"espnn: error: {path}: method 0 ('forward') delegate 0: "), (code, line)


@pytest.mark.parametrize("command", [["report"], ["bundle", "--kind", "pte"], ["bundle", "--kind", "payloads"]],
                         ids=["report", "bundle-pte", "bundle-payloads"])
@pytest.mark.parametrize("path", [ABORT, SEGV], ids=["abort", "segv"])
def test_other_commands_exit_2_with_the_same_line(command, path, tmp_path):
    """In-process: the paths behind these (ExecuTorch's Python deserializer,
    pte_suite) did not crash on these files, but they must give the check's
    message, the same as `espnn run`, and exit code 2."""
    import contextlib
    import io

    from executorch_espnn.cli import main

    out = ["-o", str(tmp_path / "out.bin")] if command[0] == "bundle" else []
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main([*command, str(path), *out])
    lines = [ln for ln in err.getvalue().splitlines() if ln.startswith("espnn: ")]
    assert code == 2 and len(lines) == 1, (code, err.getvalue()[-2000:])
    assert lines[0].startswith(f"espnn: error: {path}: method 0 ('forward') delegate 0: "), lines
    assert lines[0].endswith("(the file is corrupt, or not a program ExecuTorch 1.5 wrote)"), lines
    if command == ["report"]:
        assert lines[0] == espnn_error("run", str(path))[1]


def test_pte_suite_refuses_a_corrupt_program():
    from executorch_espnn import pte_suite

    for path in (ABORT, SEGV):
        with pytest.raises(InvalidProgramError, match="delegate 0"):
            pte_suite.make_suite(path.read_bytes(), cases=1, runs=1)


def test_the_loader_asks_executorch_for_full_verification(monkeypatch):
    """After our check, ExecuTorch's own verification (the flatbuffers
    Verifier) must still run: load_program passes InternalConsistency."""
    from executorch.runtime import Runtime, Verification

    from executorch_espnn import runtime

    seen = []
    real = Runtime.load_program

    def spy(self, data, **kw):
        seen.append(kw.get("verification"))
        return real(self, data, **kw)

    monkeypatch.setattr(Runtime, "load_program", spy)
    runtime.load_program(ORIGINAL)
    runtime.load_program(ORIGINAL.read_bytes())
    assert seen == [Verification.InternalConsistency] * 2


# ------------------------------------------------------- each rule of the check
def test_the_inline_control_program_passes_and_runs(inline_doc):
    """The field tests below start from this program; it is valid."""
    import torch

    from executorch_espnn.runtime import run_pte

    pte = pte_json.to_pte(inline_doc)
    check_pte(pte)
    x = torch.randn(1, 3, 12, 12, generator=torch.Generator().manual_seed(0))
    assert torch.equal(run_pte(pte, [x])[0], run_pte(ORIGINAL, [x])[0])


def _plan(doc):
    return doc["execution_plan"][0]


def _delegate(doc):
    return _plan(doc)["delegates"][0]


FIELD_EDITS = {
    "no method list": (lambda d: d.pop("execution_plan"), "no method list (execution_plan)"),
    "no method name": (lambda d: _plan(d).pop("name"), "method 0: no name"),
    "method name not ascii": (lambda d: _plan(d).update(name="vorw\u00e4rts"),
                              "method 0: the name 'vorw??rts' has a byte 0xc3 that is not printable ASCII"),
    "no backend id": (lambda d: _delegate(d).pop("id"), "delegate 0: no backend id"),
    "backend id with a newline": (lambda d: _delegate(d).update(id="EspNN\nBackend"),
                                  "delegate 0: the backend id 'EspNN?Backend' has a byte 0x0a"),
    "no processed": (lambda d: _delegate(d).pop("processed"), "delegate 0: no processed-data reference"),
    "inline index out of range": (lambda d: _delegate(d)["processed"].update(index=7),
                                  "delegate 0: inline data 7 referenced, the program has 1"),
    "no inline data list": (lambda d: d.pop("backend_delegate_data"),
                            "delegate 0: inline data 0 referenced, but the program has no inline delegate data"),
    "inline entry without bytes": (lambda d: d["backend_delegate_data"][0].pop("data"),
                                   "delegate 0: inline data 0 has no bytes"),
    "segment without segment list": (lambda d: (_delegate(d)["processed"].update(location="SEGMENT"),
                                                d.pop("segments")),
                                     "delegate 0: segment 0 referenced, but the program has no segment list"),
    "segment index out of range": (
        lambda d: (_delegate(d)["processed"].update(location="SEGMENT", index=2),
                   d.update(segments=[{"offset": 0, "size": 0}, {"offset": 0, "size": 16}])),
        "delegate 0: segment 2 referenced, the program has 2"),
    "compile spec without key": (lambda d: _delegate(d).update(compile_specs=[{"value": [1]}]),
                                 "delegate 0 compile spec 0: no key"),
    "compile spec without value": (lambda d: _delegate(d).update(compile_specs=[{"key": "k"}]),
                                   "delegate 0 compile spec 0: no value"),
    "operator name not ascii": (lambda d: _plan(d).update(operators=[{"name": "aten::\u00fcber", "overload": "out"}]),
                                "operator 0: the name 'aten::??ber' has a byte 0xc3"),
    "operator overload not ascii": (lambda d: _plan(d).update(operators=[{"name": "aten::add", "overload": "\u00e9"}]),
                                    "operator 0: the overload '??' has a byte 0xc3"),
}


@pytest.mark.parametrize("edit", list(FIELD_EDITS), ids=list(FIELD_EDITS))
def test_each_rule_names_the_field(inline_doc, edit):
    change, expected = FIELD_EDITS[edit]
    doc = copy.deepcopy(inline_doc)
    change(doc)
    assert expected in rejection(pte_json.to_pte(doc))


def test_a_delegate_without_compile_specs_passes(inline_doc):
    """program.fbs lets a delegate omit the list, and ExecuTorch 1.5.1 loads
    such a program: the check must not refuse it."""
    doc = copy.deepcopy(inline_doc)
    _delegate(doc).pop("compile_specs")
    check_pte(pte_json.to_pte(doc))


def test_a_segment_reference_in_range_passes(inline_doc):
    doc = copy.deepcopy(inline_doc)
    _delegate(doc)["processed"].update(location="SEGMENT", index=1)
    doc["segments"] = [{"offset": 0, "size": 0}, {"offset": 0, "size": 16}]
    check_pte(pte_json.to_pte(doc))  # ExecuTorch decides whether the segment loads


def test_header_rules():
    original = ORIGINAL.read_bytes()
    assert "too short" in rejection(original[:7])
    assert "bytes 4-7: 45 54 31 33" in rejection(original[:4] + b"ET13" + original[8:])
    assert "is larger than a flatbuffer" not in rejection(original[:900])  # eh00 says 976 bytes
    assert "program size of 976 bytes, the file has 900" in rejection(original[:900])
    short_header = bytearray(original)
    short_header[12] = 8  # the extended header's length
    assert "the extended header claims 8 bytes" in rejection(bytes(short_header))
    # The flatbuffer is whole but the delegate's data segment (at 1024 + offset) is cut: ExecuTorch's
    # loader would only say "File size is too small" while loading; the check names the segment.
    msg = rejection(original[:4000])
    assert "data segment 1 ([0, +3306) after the segment base 1024)" in msg and "past the end of the 4000-byte file: the file is truncated" in msg, msg
    check_pte(original)
    bad_root = bytearray(original)
    bad_root[0:4] = (len(original) + 4).to_bytes(4, "little")
    assert "the root table is corrupt" in rejection(bytes(bad_root))


def test_lowered_programs_pass_the_check():
    """What the lowering writes passes: programs with CPU kernels and several
    delegates, with payloads in segments (the default) or inline."""
    from espnn_dev import et_programs

    from executorch_espnn.pte_check import check_pte

    program = et_programs.cumsum_island()
    check_pte(program.pte)
    doc = pte_json.inline_program(program.pte)
    assert len(doc["backend_delegate_data"]) == 2 and _plan(doc)["operators"]
    check_pte(pte_json.to_pte(doc))


def test_known_limit_executing_a_corrupted_program_can_abort_in_executorch():
    """docs/runtime.md, known limits (report 3): kernel-arg-abort.pte (the
    cumsum_island program of et_programs.py with the `out` argument of its
    aten::cumsum.out KernelCall pointing at a non-tensor value) passes the
    check and loads, and ExecuTorch's kernel unboxing aborts the process in
    execute(). Kept as a test so that the limit is known to be real, and so
    that a fix upstream (this test failing) gets the docs updated."""
    path = DATA / "kernel-arg-abort.pte"
    check_pte(path.read_bytes())
    r = python("import torch\nfrom executorch_espnn.runtime import load_program, run_pte\n"
               f"p = load_program({str(path)!r})\np.load_method('forward')\nprint('loaded', flush=True)\n"
               "run_pte(None, [torch.zeros(1, 3, 6, 6)], program=p)\n")
    assert r.returncode == -6 and "loaded" in r.stdout, (r.returncode, r.stderr[-2000:])
    assert "EValue is not a Tensor" in r.stderr
