"""XTSP ``.pte`` suites for the board runner's .pte mode (``main/``): one
ExecuTorch program, the method to run, and test cases (input tensors and the
output tensors the host's ExecuTorch runtime computed for them).

The device runs each case through ExecuTorch's own runtime (portable kernels
for the CPU parts, the C++ EspNNBackend for the delegated parts), compares
every output with the expected one *before* it times anything, then times N
runs and prints one ``ESPNN_RESULT`` line per case. :func:`run_suite` runs
that same C++ runner core on the host, over the executorch wheel's runtime,
so the format and the rule are tested here end to end. Byte layout: docs/firmware.md, section
".pte suite format"; every magic, size, field offset, limit and dtype code
comes from the device parser's header
(``components/espnn_test_runner/include/espnn/pte_suite.h``) through
``executorch_espnn._native.PTE_SUITE_FORMAT``; none is restated here.

    from executorch_espnn import pte_suite
    case = pte_suite.make_case("ones", pte_bytes, [np.ones((1, 3, 8, 8), np.float32)])
    data = pte_suite.write_suite(pte_suite.PteSuite(pte_bytes, "forward", [case]))
    records = pte_suite.run_suite(data)          # prints ESPNN_RESULT lines

    python -m executorch_espnn.pte_suite pack model.pte -o suite.xtsp [--cases 3]
    python -m executorch_espnn.pte_suite inspect suite.xtsp
    python -m executorch_espnn.pte_suite extract suite.xtsp -o model.pte
    python -m executorch_espnn.pte_suite run suite.xtsp         # the host runner
"""

from __future__ import annotations

import argparse
import re
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from . import _native
from .container import ContainerWriter, check_cases, unseal
from .record_layout import constants, record_struct

_FORMAT = _native.PTE_SUITE_FORMAT
# MAGIC is b"XTSP" read little-endian. The .pte starts on a PTE_ALIGNMENT
# (128-byte) boundary of the suite: ExecuTorch's default segment alignment,
# so constant and delegate segments inside the program keep their alignment
# when the suite lies at an aligned address (a flash mmap is page aligned).
# Tensor data starts on DATA_ALIGNMENT boundaries. MAX_TENSORS bounds the
# inputs, and the outputs, of one case.
(MAGIC, VERSION, HEADER_SIZE, CASE_RECORD_SIZE, TENSOR_RECORD_SIZE, PTE_ALIGNMENT, DATA_ALIGNMENT, MAX_CASES,
 MAX_NAME_BYTES, MAX_METHOD_BYTES, MAX_TENSORS, MAX_RANK, MAX_RUNS) = constants(
    _FORMAT, "MAGIC", "VERSION", "HEADER_SIZE", "CASE_RECORD_SIZE", "TENSOR_RECORD_SIZE", "PTE_ALIGNMENT",
    "DATA_ALIGNMENT", "MAX_CASES", "MAX_NAME_BYTES", "MAX_METHOD_BYTES", "MAX_TENSORS", "MAX_RANK", "MAX_RUNS")
HEADER_FIELDS, CASE_FIELDS, TENSOR_FIELDS = (dict(_FORMAT[k]) for k in ("HEADER_FIELDS", "CASE_FIELDS",
                                                                         "TENSOR_FIELDS"))
# A negative case: Method::execute must refuse its inputs with InvalidArgument; it has no outputs.
CASE_FLAGS = dict(_FORMAT["CASE_FLAGS"])
CASE_FLAG_EXPECT_INVALID_ARGUMENT = CASE_FLAGS["EXPECT_INVALID_ARGUMENT"]
_HEADER = record_struct(HEADER_FIELDS, HEADER_SIZE)
_CASE = record_struct(CASE_FIELDS, CASE_RECORD_SIZE)
_TENSOR = record_struct(TENSOR_FIELDS, TENSOR_RECORD_SIZE)

# ExecuTorch ScalarType codes (c10 numbering) of the dtypes a suite carries.
DTYPE_CODES = {np.dtype(name): code for name, (code, _size) in _FORMAT["DTYPES"].items()}
CODE_DTYPES = {v: k for k, v in DTYPE_CODES.items()}
_FLOAT_CODES = {code for dtype, code in DTYPE_CODES.items() if dtype.kind == "f"}

_METHOD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,%d}" % (MAX_METHOD_BYTES - 1))


@dataclass
class PteCase:
    """One test case: the method's inputs and expected outputs, in order.
    ``atol`` (one per output, or one for all) is the largest absolute
    difference accepted for a floating-point output; 0 means bit-exact, the
    default, and integer outputs are always compared bit-exactly. ``runs=0``
    lets the runner use its default (Kconfig). ``expect_invalid_argument``:
    a negative case (no expected outputs) that passes only when
    Method::execute refuses the inputs with InvalidArgument."""

    name: str
    inputs: list[np.ndarray]
    expected: list[np.ndarray]
    runs: int = 0
    atol: float | Sequence[float] = 0.0
    expect_invalid_argument: bool = False

    def atols(self) -> list[float]:
        if isinstance(self.atol, (int, float)):
            return [float(self.atol)] * len(self.expected)
        out = [float(a) for a in self.atol]
        if len(out) != len(self.expected):
            raise ValueError(f"case {self.name}: {len(out)} tolerances for {len(self.expected)} outputs")
        return out


@dataclass
class PteSuite:
    """A program (.pte bytes), the method every case runs, and the cases."""

    pte: bytes
    method: str = "forward"
    cases: list[PteCase] = field(default_factory=list)


# ----------------------------------------------------------------- host runtime
def _torch_to_numpy(t) -> np.ndarray:
    import torch

    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        raise ValueError("bfloat16 outputs are not supported by the suite format")
    return t.numpy().copy()


def _load(pte: bytes):
    from .runtime import load_program

    return load_program(bytes(pte))


def method_input_specs(pte: bytes, method: str = "forward", program=None) -> list[tuple[tuple[int, ...], np.dtype]]:
    """(shape, numpy dtype) of each tensor input of `method`, from the
    program's metadata (what the device sees through MethodMeta)."""
    program = program if program is not None else _load(pte)
    meta = program.metadata(method)
    specs = []
    for i in range(meta.num_inputs()):
        tm = meta.input_tensor_meta(i)
        code = int(tm.dtype())
        if code not in CODE_DTYPES:
            raise ValueError(f"method {method!r} input {i}: ScalarType {code} is not supported by the suite format")
        specs.append((tuple(int(d) for d in tm.sizes()), CODE_DTYPES[code]))
    return specs


def random_inputs(pte: bytes, method: str = "forward", *, seed: int = 0, program=None) -> list[np.ndarray]:
    """Deterministic inputs of the method's shapes and dtypes: floats
    ~ N(0, 1), integers over the full int8 range (or {0, 1} for bool)."""
    rng = np.random.default_rng(seed)
    out = []
    for shape, dtype in method_input_specs(pte, method, program):
        if dtype.kind == "f":
            out.append(rng.standard_normal(shape).astype(dtype))
        elif dtype.kind == "b":
            out.append(rng.integers(0, 2, shape).astype(dtype))
        else:
            out.append(rng.integers(-128 if dtype.kind == "i" else 0, 128 if dtype.kind == "i" else 256,
                                    shape).astype(dtype))
    return out


def host_outputs(pte: bytes, inputs: Sequence[np.ndarray], method: str = "forward", program=None) -> list[np.ndarray]:
    """`method`'s outputs on the host's ExecuTorch runtime (portable kernels
    + the C++ EspNNBackend), as numpy arrays."""
    from .runtime import run_pte

    outs = run_pte(pte, [np.ascontiguousarray(x) for x in inputs], method, program=program)
    for i, o in enumerate(outs):
        if not hasattr(o, "dtype"):
            raise ValueError(f"method {method!r} output {i} is a {type(o).__name__}, not a tensor")
    return [_torch_to_numpy(o) for o in outs]


def make_case(name: str, pte: bytes, inputs: Sequence[np.ndarray] | None = None, *, method: str = "forward",
              seed: int = 0, runs: int = 0, atol: float | Sequence[float] = 0.0, program=None) -> PteCase:
    """A case whose expected outputs are what the host's ExecuTorch runtime
    computes (``inputs=None``: :func:`random_inputs` with `seed`)."""
    program = program if program is not None else _load(pte)
    feeds = list(inputs) if inputs is not None else random_inputs(pte, method, seed=seed, program=program)
    feeds = [np.asarray(x).copy(order="C") for x in feeds]
    return PteCase(name, feeds, host_outputs(pte, feeds, method, program), runs, atol)


def make_suite(pte: bytes, *, method: str = "forward", cases: int = 1, inputs: Sequence[Sequence[np.ndarray]] = (),
               runs: int = 0, atol: float = 0.0, prefix: str = "case") -> PteSuite:
    """A suite of `cases` random-input cases (seeds 0..cases-1), plus one
    case per entry of `inputs`; expected outputs from the host runtime."""
    program = _load(pte)
    out = [make_case(f"{prefix}{k}", pte, method=method, seed=k, runs=runs, atol=atol, program=program)
           for k in range(cases)]
    out += [make_case(f"{prefix}{cases + k}", pte, list(feeds), method=method, runs=runs, atol=atol, program=program)
            for k, feeds in enumerate(inputs)]
    return PteSuite(bytes(pte), method, out)


# ----------------------------------------------------------------- writer
def _check_tensor(case: str, what: str, a: np.ndarray) -> None:
    if a.dtype not in DTYPE_CODES:
        raise ValueError(f"case {case}: {what} has dtype {a.dtype}; supported: "
                         f"{', '.join(sorted(str(d) for d in DTYPE_CODES))}")
    if a.ndim > MAX_RANK or any(d > 0xFFFFFFFF for d in a.shape):
        raise ValueError(f"case {case}: {what} has shape {a.shape}; at most {MAX_RANK} dimensions")


def write_suite(suite: PteSuite) -> bytes:
    """Serializes a suite (layout in docs/firmware.md): header, case table,
    tensor tables, names, the .pte on a 128-byte boundary, tensor data on
    16-byte boundaries, CRC-32 over everything after the header."""
    cases = suite.cases
    check_cases("suite", [c.name for c in cases], [c.runs for c in cases], max_cases=MAX_CASES,
                max_name_bytes=MAX_NAME_BYTES, max_runs=MAX_RUNS)
    if not suite.pte:
        raise ValueError("empty .pte")
    if not _METHOD_RE.fullmatch(suite.method):
        raise ValueError(f"method name {suite.method!r}: an identifier of at most {MAX_METHOD_BYTES} characters")
    for c in cases:
        if c.expect_invalid_argument:
            if c.expected or len(c.inputs) > MAX_TENSORS:
                raise ValueError(f"case {c.name}: a case expecting a refusal has no outputs and "
                                 f"0..{MAX_TENSORS} inputs")
        elif len(c.inputs) > MAX_TENSORS or not 1 <= len(c.expected) <= MAX_TENSORS:
            raise ValueError(f"case {c.name}: 0..{MAX_TENSORS} inputs and 1..{MAX_TENSORS} outputs")
        for k, a in enumerate(c.atols()):
            if not (a >= 0 and np.isfinite(a)):
                raise ValueError(f"case {c.name}: tolerance of output {k} must be finite and >= 0, got {a}")

    case_table = HEADER_SIZE
    pos = case_table + CASE_RECORD_SIZE * len(cases)
    tensor_tables = []
    for c in cases:
        tensor_tables.append((pos, pos + TENSOR_RECORD_SIZE * len(c.inputs)))
        pos += TENSOR_RECORD_SIZE * (len(c.inputs) + len(c.expected))
    w = ContainerWriter(pos)
    method_off = w.place(suite.method.encode("ascii"), 1)
    name_offs = [w.place(c.name.encode("ascii"), 1) for c in cases]
    pte_off = w.place(bytes(suite.pte), PTE_ALIGNMENT)
    for i, (c, name_off, (in_tab, out_tab)) in enumerate(zip(cases, name_offs, tensor_tables)):
        for k, (table, arrays, tols) in enumerate(((in_tab, c.inputs, [0.0] * len(c.inputs)),
                                                   (out_tab, c.expected, c.atols()))):
            for j, (a, tol) in enumerate(zip(arrays, tols)):
                a = np.asarray(a).copy(order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
                _check_tensor(c.name, f"{'output' if k else 'input'} {j}", a)
                data = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
                off = w.place(data, DATA_ALIGNMENT)
                if DTYPE_CODES[a.dtype] not in _FLOAT_CODES:
                    tol = 0.0
                dims = list(a.shape) + [0] * (MAX_RANK - a.ndim)
                atol_bits = struct.unpack("<I", struct.pack("<f", tol))[0]
                w.record(_TENSOR, table + TENSOR_RECORD_SIZE * j,
                         (DTYPE_CODES[a.dtype], a.ndim, off, len(data), atol_bits, 0, 0, 0, *dims))
        flags = CASE_FLAG_EXPECT_INVALID_ARGUMENT if c.expect_invalid_argument else 0
        w.record(_CASE, case_table + i * CASE_RECORD_SIZE,
                 (name_off, len(c.name), in_tab, len(c.inputs), out_tab, len(c.expected), c.runs, flags))
    return w.seal(_HEADER, HEADER_SIZE, DATA_ALIGNMENT,
                  lambda size, crc: (MAGIC, VERSION, HEADER_SIZE, size, 0, pte_off, len(suite.pte), method_off,
                                     len(suite.method), len(cases), case_table, crc, 0))


# ----------------------------------------------------------------- reader
def _tensor(data: bytes, off: int, where: str) -> tuple[np.ndarray, float]:
    code, rank, d_off, d_size, atol_bits, flags, _r0, _r1, *dims = _TENSOR.unpack_from(data, off)
    if code not in CODE_DTYPES:
        raise ValueError(f"{where}: unknown dtype code {code}")
    if rank > MAX_RANK:
        raise ValueError(f"{where}: rank {rank} > {MAX_RANK}")
    dtype = CODE_DTYPES[code].newbyteorder("<")
    shape = tuple(dims[:rank])
    if int(np.prod(shape, dtype=np.int64)) * dtype.itemsize != d_size:
        raise ValueError(f"{where}: {d_size} data bytes do not match shape {shape} of {dtype}")
    if d_off % DATA_ALIGNMENT or d_off + d_size > len(data):
        raise ValueError(f"{where}: data at {d_off} (+{d_size}) is misaligned or outside the suite")
    arr = np.frombuffer(data, dtype, count=d_size // dtype.itemsize if dtype.itemsize else 0, offset=d_off)
    return arr.reshape(shape).astype(CODE_DTYPES[code]), struct.unpack("<f", struct.pack("<I", atol_bits))[0]


def read_suite(data: bytes) -> PteSuite:
    """Decodes a suite (checks magic, version, size, CRC and every record).
    For tools and tests; on the chip the C++ parser (pte_suite.cpp) decides."""
    data = bytes(data)
    h = unseal(data, _HEADER, HEADER_FIELDS, magic=MAGIC, version=VERSION, header_size=HEADER_SIZE,
               size_field="suite_size", noun=".pte suite")
    size, pte_off, pte_size, m_off, m_size, count, table = (
        h[k] for k in ("suite_size", "pte_offset", "pte_size", "method_offset", "method_size", "case_count",
                       "case_table"))
    if pte_off % PTE_ALIGNMENT or pte_off + pte_size > size:
        raise ValueError("the .pte is misaligned or outside the suite")
    method = data[m_off:m_off + m_size].decode("ascii")
    cases = []
    for i in range(count):
        name_off, name_size, in_tab, n_in, out_tab, n_out, runs, flags = _CASE.unpack_from(
            data, table + i * CASE_RECORD_SIZE)
        name = data[name_off:name_off + name_size].decode("ascii")
        ins = [_tensor(data, in_tab + j * TENSOR_RECORD_SIZE, f"case {name} input {j}")[0] for j in range(n_in)]
        outs = [_tensor(data, out_tab + j * TENSOR_RECORD_SIZE, f"case {name} output {j}") for j in range(n_out)]
        cases.append(PteCase(name, ins, [o[0] for o in outs], runs, [o[1] for o in outs],
                             bool(flags & CASE_FLAG_EXPECT_INVALID_ARGUMENT)))
    return PteSuite(data[pte_off:pte_off + pte_size], method, cases)


# ----------------------------------------------------------------- host runner
# Pools of the host run: ExecuTorch's method allocator (which also serves
# the delegate's arena and scratch) and its temp allocator. The board takes
# them from Kconfig (ESPNN_RUNNER_METHOD_POOL_KB ...); the host has room to
# spare for larger models.
HOST_METHOD_POOL_BYTES = 16 << 20
HOST_TEMP_POOL_BYTES = 1 << 20


def run_suite(data: bytes, *, default_runs: int = 3, write: Callable[[str], None] = print,
              platform: str = "host-executorch", method_pool_bytes: int = HOST_METHOD_POOL_BYTES,
              temp_pool_bytes: int = HOST_TEMP_POOL_BYTES, misalign: int = 0) -> list[dict]:
    """Runs a suite with the board runner's own C++ core
    (``espnn::pte::RunSuite``, components/espnn_test_runner/src/pte_runner.cpp,
    bound in ``_et_backend``) on the host's ExecuTorch runtime: per case,
    load the method, run once and compare every output, and only when they
    match time N runs. Writes the ``ESPNN_BEGIN/RESULT/END`` lines (v=1,
    mode=pte) through `write` and returns them parsed. The host has no
    cycle counter or heap statistics: those fields are "na". `misalign`
    places the suite that many bytes off a 128-byte boundary (the board
    then copies the program to align it)."""
    from .bundle import parse_result_line
    from .runtime import _runtime

    _runtime()  # executorch.runtime: its CPU kernels register with libexecutorch.so
    from . import _et_backend

    lines: list[str] = []

    def emit(line: str) -> None:
        lines.append(line)
        write(line)

    _et_backend.run_suite(bytes(data), default_runs, emit, platform, method_pool_bytes, temp_pool_bytes, misalign)
    return [parse_result_line(ln) for ln in lines]


# ----------------------------------------------------------------- CLI
def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m executorch_espnn.pte_suite",
                                 description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="a suite of random-input cases; expected outputs from the host runtime")
    p.add_argument("pte", type=Path)
    p.add_argument("-o", "--output", required=True, type=Path)
    p.add_argument("--method", default="forward")
    p.add_argument("--cases", type=int, default=1)
    p.add_argument("--runs", type=int, default=0)
    p.add_argument("--atol", type=float, default=0.0, help="tolerance for float outputs (default: bit-exact)")
    x = sub.add_parser("extract", help="write the suite's .pte (e.g. for ExecuTorch's selective build)")
    x.add_argument("suite", type=Path)
    x.add_argument("-o", "--output", required=True, type=Path)
    i = sub.add_parser("inspect", help="list a suite's cases")
    i.add_argument("suite", type=Path)
    r = sub.add_parser("run", help="run a suite on the host's ExecuTorch runtime, as the board does")
    r.add_argument("suite", type=Path)
    r.add_argument("--runs", type=int, default=3, help="timed runs for cases that say 0")
    args = ap.parse_args(argv)
    if args.cmd == "pack":
        suite = make_suite(args.pte.read_bytes(), method=args.method, cases=args.cases, runs=args.runs,
                           atol=args.atol, prefix=re.sub(r"[^A-Za-z0-9_.-]", "_", args.pte.stem)[:40] + "_")
        data = write_suite(suite)
        args.output.write_bytes(data)
        print(f"wrote {args.output}: {len(suite.cases)} case(s), {len(data)} bytes")
    elif args.cmd == "extract":
        args.output.write_bytes(read_suite(args.suite.read_bytes()).pte)
    elif args.cmd == "inspect":
        s = read_suite(args.suite.read_bytes())
        print(f"pte {len(s.pte)} B, method {s.method}, {len(s.cases)} case(s)")
        for c in s.cases:
            ins = ", ".join(f"{a.dtype}{list(a.shape)}" for a in c.inputs)
            outs = ", ".join(f"{a.dtype}{list(a.shape)}" for a in c.expected)
            print(f"{c.name}: inputs [{ins}] -> outputs [{outs}], runs {c.runs or 'default'}, atol {c.atols()}")
    else:
        recs = run_suite(args.suite.read_bytes(), default_runs=args.runs)
        return 0 if recs and recs[-1].get("failed") == 0 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
