"""The checked-in fuzz seeds (host/fuzz/corpus/) are what their generators
make now, so a format or lowering change (a new opcode, a new tensor flag)
cannot leave the fuzzers starting from outdated inputs unnoticed.

* corpus/run and corpus/parse (host/fuzz/make_corpus.py): the op corpus
  graphs, the valid mutation blobs and the defect-class blobs are made again
  here and compared byte for byte. The single-op graphs taken from tests/ops
  are not made again (that runs all of tests/ops, minutes); what goes stale
  there when an op is added is checked instead: one seed per opcode that
  can stand alone, each a graph of that op alone which the parser accepts.
* corpus/et_glue and corpus/et_pte (host/fuzz/make_glue_corpus.py): real
  programs, quantized by PyTorch's float kernels, whose last bits differ
  between CPUs (the scales and what is derived from them: with scalar ATen
  a scale moves by an ulp and a multiplier by 1). So file names, control
  bytes, the format version, sizes, every tensor's dtype, shape, memory,
  offset, size and flags (EXTERNAL among them), every op's name, inputs,
  outputs and parameter names are compared exactly, and scales, zero points
  and parameter words to within their last bits.

A failure names the generator to run (docs/fuzzing.md, "Seed corpus").
"""

from __future__ import annotations

import importlib.util
import math
import struct
import sys
from pathlib import Path

import pytest

from executorch_espnn import _native

REPO = Path(__file__).resolve().parents[2]
FUZZ = REPO / "host" / "fuzz"
CORPUS = FUZZ / "corpus"


def _generator(name: str):
    if str(FUZZ) not in sys.path:  # the generators import their helper module from their own directory
        sys.path.insert(0, str(FUZZ))
    spec = importlib.util.spec_from_file_location(name, FUZZ / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _checked_in(target: str) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted((CORPUS / target).iterdir())}


def _stale(target: str, generator: str) -> str:
    return (f"host/fuzz/corpus/{target} is older than what host/fuzz/{generator} makes now; run "
            f"PYTHONPATH=BUILD_DIR/pkg python host/fuzz/{generator} (docs/fuzzing.md, \"Seed corpus\")")


# ---------------------------------------------------------------- fuzz_parse, fuzz_run

@pytest.fixture(scope="module")
def xts3_seeds() -> dict[str, dict[str, bytes]]:
    return _generator("make_corpus").seeds(single_op=False)


@pytest.mark.parametrize("target", ["run", "parse"])
def test_xts3_seeds_are_what_make_corpus_makes(xts3_seeds, target):
    have = {n: b for n, b in _checked_in(target).items() if not n.startswith("op_")}
    want = xts3_seeds[target]
    assert sorted(have) == sorted(want), _stale(target, "make_corpus.py")
    assert [n for n in want if have[n] != want[n]] == [], _stale(target, "make_corpus.py")


def _stands_alone(name: str) -> bool:
    """An op a graph can hold alone: not a region header (no inputs of its own)."""
    return _native.OPCODES[name]["max_inputs"] > 0


@pytest.mark.parametrize("target", ["run", "parse"])
def test_every_opcode_has_a_single_op_seed(target):
    seeds = {n: b for n, b in _checked_in(target).items() if n.startswith("op_")}
    want = sorted(f"op_{name}_0.xts3" for name in _native.OPCODES if _stands_alone(name))
    assert sorted(seeds) == want, _stale(target, "make_corpus.py")
    for file, blob in seeds.items():
        _native.Program(blob)  # accepted by this parser
        ops = {op["op"] for op in _native.parse(blob)["ops"]}
        assert ops == {file[len("op_"):-len("_0.xts3")]}, (file, ops)


def test_a_new_opcode_makes_the_single_op_seeds_stale(monkeypatch):
    """The check above follows the format: one more opcode, one seed missing."""
    top = max(d["opcode"] for d in _native.OPCODES.values())
    grown = {**_native.OPCODES, "NEW_OP": {**_native.OPCODES["ADD"], "opcode": top + 1}}
    monkeypatch.setattr(_native, "OPCODES", grown)
    with pytest.raises(AssertionError, match="is older than what host/fuzz/make_corpus.py makes"):
        test_every_opcode_has_a_single_op_seed("run")


# ---------------------------------------------------------------- fuzz_et_glue, fuzz_et_pte

def payload_outline(blob: bytes) -> tuple[dict, list]:
    """A lowered payload as (what does not depend on the CPU that quantized
    it, the numbers that do: scales, zero points, parameter words)."""
    s = _native.parse(blob)
    numbers = []
    tensors = []
    for t in s["tensors"]:
        tensors.append({k: v for k, v in t.items() if k not in ("scale", "zero_point")})
        numbers += [("scale", t["scale"]), ("word", t["zero_point"])]
    ops = []
    for op in s["ops"]:
        ops.append({**{k: v for k, v in op.items() if k != "params"}, "params": list(op["params"])})
        numbers += [("word", v) for v in op["params"].values()]
    return {**s, "tensors": tensors, "ops": ops}, numbers


def _near(a: tuple, b: tuple) -> bool:
    """Two numbers of payload_outline from different CPUs: a scale some ulps
    off, an integer word (a multiplier, a float's bits) off in its last bits."""
    (kind, x), (_, y) = a, b
    if kind == "scale":
        return math.isclose(x, y, rel_tol=1e-5)
    return abs(x - y) <= 1 + (max(abs(x), abs(y)) >> 16)


def same_payload(a: bytes, b: bytes) -> bool:
    (shape_a, numbers_a), (shape_b, numbers_b) = payload_outline(a), payload_outline(b)
    return shape_a == shape_b and all(map(_near, numbers_a, numbers_b))


def same_glue_seed(a: bytes, b: bytes) -> bool:
    """fuzz_et_glue's input: control byte, payload, optional layout byte."""
    def split(seed: bytes) -> tuple[int, bytes, bytes]:
        size = struct.unpack_from("<I", seed, 1 + 8)[0]  # the XTS3 header's blob size (kHdrBlobSize)
        return seed[0], seed[1:1 + size], seed[1 + size:]

    (ca, pa, ta), (cb, pb, tb) = split(a), split(b)
    return ca == cb and ta == tb and same_payload(pa, pb)


def same_pte(a: bytes, b: bytes) -> bool:
    """The same delegates, each with the same payload (same_payload)."""
    from executorch_espnn.partition.report import pte_payloads

    da, db = pte_payloads(a), pte_payloads(b)
    return ([d[:3] for d in da] == [d[:3] for d in db]
            and all(same_payload(x[3], y[3]) for x, y in zip(da, db)))


@pytest.fixture(scope="module")
def glue_seeds() -> dict[str, dict[str, bytes]]:
    pytest.importorskip("executorch")
    return _generator("make_glue_corpus").seeds()


def test_et_glue_seeds_are_what_make_glue_corpus_makes(glue_seeds):
    have, want = _checked_in("et_glue"), glue_seeds["et_glue"]
    assert sorted(have) == sorted(want), _stale("et_glue", "make_glue_corpus.py")
    stale = [n for n in want if not same_glue_seed(have[n], want[n])]
    assert stale == [], _stale("et_glue", "make_glue_corpus.py")


def test_et_pte_seeds_are_what_make_glue_corpus_makes(glue_seeds):
    have, want = _checked_in("et_pte"), glue_seeds["et_pte"]
    assert sorted(have) == sorted(want), _stale("et_pte", "make_glue_corpus.py")
    stale = [n for n in want if not same_pte(have[n], want[n])]
    assert stale == [], _stale("et_pte", "make_glue_corpus.py")


def test_same_payload_sees_a_flag_an_op_and_a_scale_but_not_an_ulp():
    """What a stale glue seed differs in (the EXTERNAL flag, another op, a
    rescaled tensor) makes another payload; a scale one ulp off does not."""
    from executorch_espnn.serialization import Xts3Writer

    def blob(external: bool = True, scale: float = 0.5, dequantize: bool = False) -> bytes:
        w = Xts3Writer()
        x = w.tensor((4,), "FLOAT32")
        q = w.tensor((4,), "INT8", scale=scale, zero_point=0)
        w.op("QUANTIZE", [x], [q], inv_scale_f32=1 / scale, zero_point=0)
        if dequantize:
            y = w.tensor((4,), "FLOAT32")
            w.op("DEQUANTIZE", [q], [y], scale_f32=scale, zero_point=0)
        else:
            y = w.tensor((4,), "INT8", scale=scale, zero_point=0)
            w.op("REQUANTIZE", [q], [y], input_zero_point=0, output_zero_point=0, mult=1 << 30, shift=1)
        w.set_inputs([x])
        w.set_outputs([y])
        if external:
            w.mark_external_inputs()
        return w.to_bytes()

    base = blob()
    assert same_payload(blob(scale=0.5000001), base)
    assert not same_payload(blob(external=False), base)
    assert not same_payload(blob(dequantize=True), base)
    assert not same_payload(blob(scale=0.25), base)
