"""nn.GRU and nn.LSTM through the public API (``quantize`` -> ``to_espnn_edge``
-> ``.pte`` -> ``executorch.runtime``): one or two layers, batch_first both
ways, unbatched, without biases, with the final hidden state read, an LSTM
after a Conv1d: one delegate, no op on the CPU, within the zoo's bar of the
convert_pt2e model (3 LSB, most elements exact). The payload and ExecuTorch's
planned memory do not grow with the sequence length.

Before: the Edge dialect unrolled the recurrence (a GRU keyword spotter over
49 frames: 1,187 ops on the CPU, 2,471,344 B planned by ExecuTorch; only the
final linear delegated)."""

import logging

import pytest
import torch
from torch import nn

from executorch_espnn import output_scales, runtime
from executorch_espnn.partition.report import delegation_report, pte_report
from pte_harness import delegates, deviation, quantize_and_lower

ACCURACY_LSB = 3.0


class Rnn(nn.Module):
    """A keyword-spotter-style head: recurrent layer(s), the last step (or h_n) to a linear classifier."""

    def __init__(self, cell, hidden=64, layers=1, batch_first=True, bias=True, read_h_n=False, features=10):
        super().__init__()
        self.rnn = cell(features, hidden, num_layers=layers, batch_first=batch_first, bias=bias)
        self.fc = nn.Linear(hidden, 12)
        self.batch_first, self.read_h_n = batch_first, read_h_n

    def forward(self, x):
        y, state = self.rnn(x)
        if self.read_h_n:
            h_n = state[0] if isinstance(state, tuple) else state
            return self.fc(h_n[-1])
        last = y[-1] if (not self.batch_first or y.dim() == 2) else y[:, -1]
        return self.fc(last)


class ConvLstm(nn.Module):
    """Conv1d feature extractor, then an LSTM over its time axis (activity recognition)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(6, 16, 5, padding=2)
        self.lstm = nn.LSTM(16, 32, batch_first=True)
        self.fc = nn.Linear(32, 6)

    def forward(self, x):  # [B, 6, T]
        y = torch.relu(self.conv(x)).transpose(1, 2)
        out, _ = self.lstm(y)
        return self.fc(out[:, -1])


class SequenceOut(nn.Module):
    """The whole output sequence is the model's output (a sequence tagger)."""

    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(8, 16, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


MODELS = {
    "gru_kws": (lambda: Rnn(nn.GRU), (1, 49, 10)),
    "gru_sequence_first": (lambda: Rnn(nn.GRU, batch_first=False), (49, 2, 10)),
    "gru_two_layers": (lambda: Rnn(nn.GRU, hidden=32, layers=2), (2, 20, 10)),
    "gru_reads_h_n": (lambda: Rnn(nn.GRU, read_h_n=True), (1, 49, 10)),
    "gru_unbatched": (lambda: Rnn(nn.GRU, hidden=32), (30, 10)),
    "gru_no_bias": (lambda: Rnn(nn.GRU, hidden=32, bias=False), (1, 30, 10)),
    "gru_sequence_output": (lambda: SequenceOut(nn.GRU), (2, 12, 8)),
    "lstm_kws": (lambda: Rnn(nn.LSTM), (1, 49, 10)),
    "lstm_sequence_first": (lambda: Rnn(nn.LSTM, batch_first=False), (49, 2, 10)),
    "lstm_two_layers": (lambda: Rnn(nn.LSTM, hidden=32, layers=2), (2, 20, 10)),
    "lstm_reads_h_n": (lambda: Rnn(nn.LSTM, read_h_n=True), (1, 49, 10)),
    "lstm_after_conv1d": (lambda: ConvLstm(), (1, 6, 64)),
    "lstm_sequence_output": (lambda: SequenceOut(nn.LSTM), (2, 12, 8)),
}


def _lower(build, shape):
    q, edge, _ = quantize_and_lower(build, shape)
    report = delegation_report(edge).methods["forward"]
    payloads = [bytes(d.processed_bytes) for d in delegates(edge)]
    return q, report, payloads, edge.to_executorch()


@pytest.fixture(scope="module", params=sorted(MODELS))
def lowered(request):
    build, shape = MODELS[request.param]
    return (request.param, shape, *_lower(build, shape))


def test_recurrent_model_is_one_delegate_with_nothing_on_the_cpu(lowered):
    name, _, _, report, _, et = lowered
    assert len(report.partitions) == 1, f"{name}: {len(report.partitions)} partitions"
    assert report.cpu_ops == [], f"{name}: {[(c.op, c.reason) for c in report.cpu_ops][:8]}"
    ops = pte_report(et.buffer).methods["forward"].partitions[0].ops
    kind = "GRU" if name.startswith("gru") else "LSTM"
    layers = 2 if "two_layers" in name else 1
    assert ops.get(kind) == layers, ops


def test_recurrent_model_matches_convert_pt2e_within_the_bar(lowered):
    name, shape, q, _, _, et = lowered
    worst, exact = deviation(q, et.buffer, lambda g: torch.randn(shape, generator=g), runs=10)
    assert worst <= ACCURACY_LSB + 1e-3, f"{name}: {worst:.2f} LSB"
    assert exact > 0.5, f"{name}: only {100 * exact:.0f}% of elements exact"


def test_kws_payload_and_memory_do_not_grow_with_the_sequence():
    """The GRU keyword spotter (hidden 64) over 49 and 98 frames: the same payload size (one
    GRU record loops over the steps), and memory in kilobytes: the delegate's arena holds the
    int8 input and the last step alone (the classifier reads y[:, -1]), so only the input's
    49 x 10 more bytes are added; ExecuTorch plans only the boundary buffers."""
    sizes, arenas, planned = [], [], []
    for frames in (49, 98):
        _, report, payloads, et = _lower(lambda: Rnn(nn.GRU), (1, frames, 10))
        assert len(payloads) == 1 and report.cpu_ops == []
        sizes.append(len(payloads[0]))
        arenas.append(report.partitions[0].payload.arena_bytes)
        planned.append(pte_report(et.buffer).methods["forward"].planned_memory_bytes)
    assert sizes[0] == sizes[1], sizes
    assert arenas[1] - arenas[0] <= 49 * 10 + 16, arenas  # the int8 input, 16-byte aligned
    assert max(arenas) < 2 * 1024, arenas
    assert max(planned) < 16 * 1024, planned  # was 2,471,344 B with the recurrence unrolled


def test_a_gru_the_delegate_cannot_take_still_runs_on_the_cpu(caplog):
    """Weights so small that the biases do not fit int32 in units of the weight x input
    scale: the partitioner refuses the GRU; to_espnn_edge lowers it again as PyTorch's
    decomposition (the espnn::gru op has no CPU kernel), says so, and the program still
    computes what convert_pt2e does."""
    def build():
        m = Rnn(nn.GRU, hidden=16)
        with torch.no_grad():
            m.rnn.weight_ih_l0.mul_(1e-9)
        return m

    with caplog.at_level(logging.WARNING, logger="executorch_espnn.partition.api"):
        q, edge, _ = quantize_and_lower(build, (1, 20, 10))
    assert any("stays on the CPU" in r.getMessage() and "does not fit int32" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    report = delegation_report(edge).methods["forward"]
    assert report.cpu_ops, "the GRU should run on the CPU"
    x = torch.randn(1, 20, 10)
    got = runtime.run_pte(edge.to_executorch().buffer, [x])[0]
    with torch.no_grad():
        want = q(x)
    assert float((got - want).abs().max()) <= output_scales(q)[0] + 1e-6


def test_a_gru_with_a_given_initial_state_stays_pytorchs():
    """h0 from an input is not the zero state the delegate's op assumes: the GRU is left as
    aten.gru (the CPU) and the program is still right."""
    class WithState(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = nn.GRU(10, 16, batch_first=True)

        def forward(self, x, h0):
            return self.gru(x, h0)[0]

    from pte_harness import lower, quantize

    torch.manual_seed(0)
    model = WithState().eval()
    example = (torch.randn(1, 20, 10), torch.randn(1, 1, 16) * 0.5)
    q = quantize(model, example)
    assert not any("espnn" in str(n.target) for n in q.graph.nodes)
    edge = lower(q, example)
    got = runtime.run_pte(edge.to_executorch().buffer, list(example))[0]
    with torch.no_grad():
        want = q(*example)
    assert torch.allclose(got, want, atol=1e-5)


def test_the_operator_suites_quantized_lstm_cases_are_not_nn_lstm():
    """Why ExecuTorch's operator suite still lowers its LSTM cases unrolled under our flow
    (docs/runtime.md): for a quantizing flow its test_lstm builds
    torch.ao.nn.quantizable.LSTM (`use_quantizable_lstm = flow.quantize`), an LSTM written
    cell by cell in Python (linears, sigmoid/tanh, mul/add per step) that never becomes
    aten.lstm.input, so there is nothing for EspNNQuantizer's recurrent rewrite to take;
    its cells are delegated as ordinary ops. The same model built with nn.LSTM, which a
    user writes, becomes espnn::lstm. Fails if the suite changes either way."""
    pytest.importorskip("executorch.backends.test.suite.operators.test_lstm")
    from executorch.backends.test.suite.operators.test_lstm import Model

    from executorch_espnn.recurrent_ops import LSTM
    from pte_harness import quantize

    def lstm_ops(use_quantizable_lstm: bool) -> tuple[int, int]:
        torch.manual_seed(0)
        model = Model(use_quantizable_lstm=use_quantizable_lstm).eval()
        x = (torch.randn(1, 5, 64),)  # the suite's shape: batch 1, 5 steps, 64 features
        graph = quantize(model, x).graph
        targets = [n.target for n in graph.nodes if n.op == "call_function"]
        return targets.count(LSTM), sum(1 for t in targets if "lstm" in str(t))

    assert lstm_ops(use_quantizable_lstm=True) == (0, 0)  # no LSTM op at all: Python cells
    assert lstm_ops(use_quantizable_lstm=False)[0] == 1  # nn.LSTM: the one delegable op
