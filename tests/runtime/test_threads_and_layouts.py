"""The host API gives the sequential, contiguous answer or raises: one
``_native.Program`` or one loaded .pte shared by several threads, inputs in
any memory layout, and inputs that ExecuTorch's binding would abort on."""

import threading

import numpy as np
import pytest
import torch

from executorch_espnn import _native, runtime
from executorch_espnn.partition.report import pte_payloads
from pte_harness import lower, quantize

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class PreluNet(torch.nn.Module):
    """conv + per-channel prelu + conv: a float (EXTERNAL) input, a CHANNEL_LUT, more than one op."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.act = torch.nn.PReLU(8)
        self.c2 = torch.nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x):
        return self.c2(self.act(self.c1(x)))


@pytest.fixture(scope="module")
def pte():
    torch.manual_seed(0)
    model = PreluNet().eval()
    with torch.no_grad():
        model.act.weight.uniform_(-0.5, 0.5)
    example = (torch.randn(1, 3, 16, 16),)
    calib = [(torch.randn(1, 3, 16, 16),) for _ in range(4)]
    return lower(quantize(model, example, calib), example).to_executorch().buffer


def _feeds(program: _native.Program, seed: int) -> list:
    s, rng, out = program.summary(), np.random.default_rng(seed), []
    for i in s["inputs"]:
        t = s["tensors"][i]
        out.append(rng.standard_normal(t["shape"]).astype(np.float32) if t["dtype"] == "FLOAT32"
                   else rng.integers(-128, 128, t["shape"]).astype(np.int8))
    return out


def _hammer(threads: int, runs: int, call, reference) -> list[str]:
    """`threads` threads each making `runs` calls call(k) on inputs k; returns the wrong ones."""
    wrong, start = [], threading.Barrier(threads)

    def work(tid):
        start.wait()
        for n in range(runs):
            k = (tid * 7 + n) % len(reference)
            got = call(k)
            if any(not np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(got, reference[k])):
                wrong.append(f"thread {tid} run {n} inputs {k}")

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return wrong


def test_one_native_program_shared_by_8_threads_matches_sequential(pte):
    """8 threads x 500 runs on one Program (the binding releases the GIL in
    Invoke; the Program's mutex keeps its one arena and EXTERNAL bindings to
    one caller at a time). Without the mutex about a fifth of the outputs
    were wrong."""
    blob = pte_payloads(pte)[0][3]
    program = _native.Program(blob)
    assert any(program.summary()["tensors"][i]["flags"] for i in program.summary()["inputs"])  # EXTERNAL input
    feeds = [_feeds(program, k) for k in range(16)]
    reference = [program.run(f) for f in feeds]
    assert len({r[0].tobytes() for r in reference}) == 16  # different inputs give different outputs
    wrong = _hammer(8, 500, lambda k: program.run(feeds[k]), reference)
    assert not wrong, f"{len(wrong)} of 4000 runs wrong, first: {wrong[:3]}"
    assert all(np.array_equal(program.run(f)[0], r[0]) for f, r in zip(feeds, reference))


def test_one_loaded_pte_shared_by_8_threads_matches_sequential(pte):
    program = runtime.load_program(pte)
    xs = [torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(k)) for k in range(8)]
    reference = [runtime.run_pte(None, [x], program=program) for x in xs]
    wrong = _hammer(8, 40, lambda k: runtime.run_pte(None, [xs[k]], program=program), reference)
    assert not wrong, wrong[:3]


def _misaligned(a: np.ndarray) -> np.ndarray:
    buf = bytearray(a.nbytes + 1)
    out = np.ndarray(a.shape, a.dtype, buffer=buf, offset=1)
    out[...] = a
    return out


LAYOUTS = {
    "channels_last": lambda x: x.contiguous(memory_format=torch.channels_last),
    "transposed_view": lambda x: x.transpose(2, 3).contiguous().transpose(2, 3),
    "sliced_view": lambda x: torch.cat([x, torch.zeros_like(x)], 3)[..., :16],
    "strided_slice": lambda x: torch.stack([x, -x], 4).reshape(1, 3, 16, 32)[..., ::2],
    "fortran_numpy": lambda x: np.asfortranarray(x.numpy()),
    "negative_strides_numpy": lambda x: np.ascontiguousarray(x.numpy()[..., ::-1])[..., ::-1],
    "misaligned_numpy": lambda x: _misaligned(x.numpy()),
    "big_endian_numpy": lambda x: x.numpy().astype(">f4"),
    "expanded_batch": lambda x: x[:1].expand(1, 3, 16, 16),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_any_layout_gives_the_contiguous_answer(pte, layout):
    program = runtime.load_program(pte)
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(3))
    want = runtime.run_pte(None, [x], program=program)[0]
    feed = LAYOUTS[layout](x)
    assert np.array_equal(np.asarray(feed), x.numpy())  # the same values, laid out differently
    got = runtime.run_pte(None, [feed], program=program)[0]
    assert torch.equal(got, want), f"{layout}: max |diff| {float((got - want).abs().max())}"


def test_a_converted_layout_is_said(pte):
    program = runtime.load_program(pte)
    x = torch.randn(1, 3, 16, 16).contiguous(memory_format=torch.channels_last)
    with pytest.warns(UserWarning, match=r"input 0: channels-last converted to the program's dim order \(0, 1, 2, 3\)"):
        runtime.run_pte(None, [x], program=program)


@pytest.mark.parametrize("bad,words", [
    (np.zeros((0, 3, 16, 16), np.float32), "shape (0, 3, 16, 16)"),
    (torch.zeros(0, 3, 16, 16), "shape (0, 3, 16, 16)"),
    (np.zeros((1, 3, 16, 16), np.float64), "dtype float64"),
    (torch.zeros(1, 3, 16, 16, dtype=torch.int8), "dtype int8"),
    (torch.zeros(1, 3, 16, 16, dtype=torch.bfloat16), "dtype bfloat16"),
    (np.zeros((3, 16, 16), np.float32), "shape (3, 16, 16)"),
    (torch.zeros(1).expand(2**40, 3, 16, 16), "shape (1099511627776, 3, 16, 16)"),
    (np.zeros((1, 3, 16, 16), np.str_), "dtype <U1"),
    ([[1.0]], "is a list"),
])
def test_inputs_the_binding_would_abort_on_raise_first(pte, bad, words):
    program = runtime.load_program(pte)
    with pytest.raises(runtime.InputError) as e:
        runtime.run_pte(None, [bad], program=program)
    assert words in str(e.value) and e.value.index == 0
    with pytest.raises(runtime.InputError, match="takes 1 input"):
        runtime.run_pte(None, [], program=program)


def test_a_program_exported_channels_last_is_refused_loudly_not_misread(capfd):
    """The dim order a .pte records for its input is what run_pte feeds
    (channels-last here, whatever the caller passes). The delegate's payload
    reads its input in contiguous order, so the C++ EspNNBackend refuses that
    tensor (InvalidArgument, logged naming the input): the call raises, it
    never returns a misread result."""
    torch.manual_seed(0)
    model = PreluNet().eval()
    example = (torch.randn(1, 3, 16, 16).contiguous(memory_format=torch.channels_last),)
    lowered = lower(quantize(model, example), example).to_executorch().buffer
    program = runtime.load_program(lowered)
    assert runtime._state(program).dim_orders["forward"] == [(0, 2, 3, 1)]
    capfd.readouterr()
    for x in (example[0], example[0].contiguous()):
        with pytest.raises(RuntimeError, match="0x12"):  # Error::InvalidArgument
            runtime.run_pte(None, [x], program=program)
    assert "EspNNBackend: input 0 is not in contiguous dim order" in capfd.readouterr().err
