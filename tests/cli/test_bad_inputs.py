"""Every user error of every `espnn` subcommand is exit 2 with one line naming
the file or option: a table of malformed inputs per subcommand. Exit 4
(internal error) on any row is a bug; so is exit 3 (a lowering error) for
what is the user's input."""

import numpy as np
import pytest

from cli_harness import espnn, error_line

MODELS = "cli_models"
pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.fixture(scope="module")
def files(tmp_path_factory, compiled):
    """Malformed and awkward files, and a good .pte to run them against."""
    d = tmp_path_factory.mktemp("bad_inputs")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.save(d / "x.npy", x)
    np.save(d / "x_f64.npy", x.astype(np.float64))
    np.save(d / "x_i8.npy", x.astype(np.int8))
    np.save(d / "x_str.npy", np.array(["a", "b"]))
    np.save(d / "x_empty.npy", np.zeros((0, 3, 32, 32), np.float32))
    np.save(d / "x_rank3.npy", x[0])
    np.save(d / "calib_str.npy", np.array([["1"] * 16] * 4))
    np.save(d / "calib_complex.npy", (rng.standard_normal((4, 16)) * 1j).astype(np.complex64))
    np.save(d / "calib_float_for_int.npy", rng.standard_normal((4, 16)).astype(np.float32))
    np.savez(d / "labels_str.npz", x=rng.standard_normal((4, 16)).astype(np.float32), y=np.array(["a"] * 4))
    (d / "garbage.npy").write_bytes(b"\x93NUMPY not really")
    (d / "garbage.pte").write_bytes(b"garbage, not a program" * 10)
    (d / "img").mkdir()
    (d / "img" / "broken.png").write_bytes(b"not a png")
    (d / "a_dir").mkdir()
    (d / "a_file").write_text("x")
    _, out = compiled
    pte = (out / "tiny.pte").read_bytes()
    (d / "truncated.pte").write_bytes(pte[:-16])  # the last data segment loses its end
    return d, out / "tiny.pte"


def _rows(d, pte):
    """(argv, words the error line must contain)."""
    mlp = f"{MODELS}:mlp"
    return [
        # compile: calibration data
        (["compile", mlp, "--calibration", d / "calib_str.npy"], ["calib_str.npy", "<U1", "real numbers"]),
        (["compile", mlp, "--calibration", d / "calib_complex.npy"], ["complex", "imaginary part"]),
        (["compile", mlp, "--calibration", d / "garbage.npy"], ["garbage.npy", "not a readable .npy"]),
        (["compile", mlp, "--calibration", d / "a_dir"], ["a_dir", "no .npy or image files"]),
        (["compile", mlp, "--calibration", "/dev/null"], ["/dev/null"]),
        (["compile", mlp, "--eval-data", d / "labels_str.npz"], ["labels_str.npz", "integer class id"]),
        (["compile", "executorch_espnn.models:tiny_cnn", "--calibration", d / "img"], ["broken.png"]),
        # compile: options and output files
        (["compile", mlp, "--arena-budget", "1.0000000001K"], ["1024.0000001024 B", "1024 or 1025"]),
        (["compile", mlp, "--tolerance-lsb", "nan"], ["--tolerance-lsb", "finite number >= 0"]),
        (["compile", mlp, "--tolerance-lsb", "-1"], ["--tolerance-lsb", "finite number >= 0"]),
        (["compile", mlp, "-o", d / "a_dir.pte", "--json", d / "a_dir"], ["--json", "is a directory"]),
        (["compile", mlp, "-o", d / "a_file" / "m.pte"], ["--output", "not a folder"]),
        # run
        (["run", d / "a_dir"], ["a_dir", "is a directory"]),
        (["run", "/dev/null"], ["/dev/null", "not a regular file"]),
        (["run", d / "missing.pte"], ["missing.pte", "no such file"]),
        (["run", d / "garbage.pte"], ["garbage.pte"]),
        (["run", d / "truncated.pte"], ["truncated.pte", "lies past the end", "the file is truncated"]),
        (["report", d / "truncated.pte"], ["truncated.pte", "the file is truncated"]),
        (["run", pte, "--input", d / "x_f64.npy"], ["x_f64.npy", "dtype float64", "expects float32"]),
        (["run", pte, "--input", d / "x_i8.npy"], ["x_i8.npy", "dtype int8", "expects float32"]),
        (["run", pte, "--input", d / "x_str.npy"], ["x_str.npy", "dtype <U1"]),
        (["run", pte, "--input", d / "x_empty.npy"], ["x_empty.npy", "shape (0, 3, 32, 32)"]),
        (["run", pte, "--input", d / "x_rank3.npy"], ["x_rank3.npy", "shape (3, 32, 32)"]),
        (["run", pte, "--input", d / "a_dir"], ["--input", "is a directory"]),
        (["run", pte, "--input", "/dev/null"], ["--input", "not a regular file"]),
        (["run", pte, "--input", d / "garbage.npy"], ["garbage.npy", "not a readable .npy"]),
        (["run", pte, "--input", d / "x.npy", d / "x.npy"], []),  # argparse: one path per --input
        (["run", pte, "--input", d / "x.npy", "--input", d / "x.npy"], ["takes 1 input(s)"]),
        (["run", pte, "--reference", d / "x_str.npy"], ["x_str.npy", "not a real number type"]),
        (["run", pte, "--reference", d / "x.npy"], ["--reference", "shape"]),
        (["run", pte, "--atol", "nan"], ["--atol", "finite number >= 0"]),
        (["run", pte, "--atol", "-1"], ["--atol", "finite number >= 0"]),
        (["run", pte, "--atol", "inf"], ["--atol", "finite number >= 0"]),
        (["run", pte, "--save", d / "a_file"], ["--save", "not a folder"]),
        (["run", pte, "--method", "nope"], ["no method 'nope'"]),
        # report
        (["report", d / "a_dir"], ["is a directory"]),
        (["report", "/dev/null"], ["not a regular file"]),
        (["report", d / "garbage.pte"], ["garbage.pte"]),
        (["report", pte, "--json", d / "a_dir"], ["--json", "is a directory"]),
        (["report", pte, "--html", d / "a_file" / "r.html"], ["--html", "not a folder"]),
        # bundle
        (["bundle", d / "a_dir", "-o", d / "b.bin"], ["is a directory"]),
        (["bundle", "/dev/null", "-o", d / "b.bin"], ["not a regular file"]),
        (["bundle", d / "garbage.pte", "-o", d / "b.bin"], ["garbage.pte"]),
        (["bundle", pte, "-o", d / "a_dir"], ["--output", "is a directory"]),
        (["bundle", pte, "--kind", "pte", "-o", d / "a_file" / "s.xtsp"], ["--output", "not a folder"]),
        (["bundle", pte, "--cases", "0", "-o", d / "b.bin"], ["--cases"]),
    ]


def test_every_bad_input_is_exit_2_with_one_line_naming_it(files):
    d, pte = files
    failures = []
    for argv, words in _rows(d, pte):
        r = espnn(*argv)
        if r.code != 2:
            failures.append(f"{argv}: exit {r.code}: {r.err[-400:]}")
            continue
        if not any(ln.startswith("espnn: error:") for ln in r.err.splitlines()):
            # argparse's own usage errors say "espnn <sub>: error:"
            line = next((ln for ln in r.err.splitlines() if ": error:" in ln), "")
        else:
            line = error_line(r)
        missing = [w for w in words if str(w) not in line]
        if missing or not line:
            failures.append(f"{argv}: error line {line!r} lacks {missing}")
    assert not failures, "\n".join(failures)


def test_a_byte_swapped_input_runs_with_the_same_result(files, tmp_path):
    """A big-endian float32 .npy holds the same values: it runs (a note says
    it was converted) and gives the native file's output."""
    d, pte = files
    x = np.load(d / "x.npy")
    np.save(tmp_path / "x_be.npy", x.astype(">f4"))
    native = espnn("run", pte, "--input", d / "x.npy", "--save", tmp_path / "native")
    swapped = espnn("run", pte, "--input", tmp_path / "x_be.npy", "--save", tmp_path / "swapped")
    assert native.code == 0 and swapped.code == 0, (native, swapped)
    assert np.array_equal(np.load(tmp_path / "native" / "output_0.npy"), np.load(tmp_path / "swapped" / "output_0.npy"))


def test_fortran_order_input_is_converted_and_said(files, tmp_path):
    d, pte = files
    x = np.load(d / "x.npy")
    np.save(tmp_path / "x_f.npy", np.asfortranarray(x))
    a = espnn("run", pte, "--input", d / "x.npy", "--save", tmp_path / "c")
    b = espnn("run", pte, "--input", tmp_path / "x_f.npy", "--save", tmp_path / "f")
    assert a.code == 0 and b.code == 0, (a, b)
    assert "note: input 0: Fortran order converted" in b.out
    assert np.array_equal(np.load(tmp_path / "c" / "output_0.npy"), np.load(tmp_path / "f" / "output_0.npy"))


@pytest.mark.parametrize("dtype,word", [(np.int64, "int64"), (np.bool_, "bool"), (np.float16, "float16"),
                                        (np.uint8, "uint8")])
def test_calibration_of_another_real_dtype_is_accepted_with_a_note(tmp_path, dtype, word):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "c.npy", (rng.standard_normal((4, 16)) * 3).astype(dtype))
    r = espnn("compile", f"{MODELS}:mlp", "-o", tmp_path / "m.pte", "--calibration", tmp_path / "c.npy")
    assert r.code == 0, r
    assert f"{word} samples cast to the model input's float32" in r.err


def test_float_calibration_for_an_integer_input_is_refused(tmp_path):
    np.save(tmp_path / "c.npy", np.zeros((4, 16), np.float32))
    r = espnn("compile", f"{MODELS}:int_input", "--calibration", tmp_path / "c.npy")
    assert r.code == 2 and "floating-point samples cannot feed the model's int64 input" in error_line(r)
