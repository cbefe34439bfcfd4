#!/usr/bin/env python3
"""Accuracy of nn.GRU / nn.LSTM keyword-spotter-style models on a sequence
task trained here in seconds: the float model, the convert_pt2e model and the
.pte (the delegate's GRU/LSTM ops run by executorch.runtime). A script, not a
test (tests/runtime/test_recurrent_accuracy.py runs a shorter version).

    python benchmarks/recurrent_accuracy.py                 # GRU and LSTM, hidden 64
    python benchmarks/recurrent_accuracy.py --steps 600 --hidden 32

The task needs memory across the sequence: 49 frames of 10 noisy features
(std 0.5), two markers — a +2 pulse on feature 0 and a +-2 pulse on feature 1 —
at random distinct frames; the class (4) is which marker came first and the
sign of the second. Nothing about it suits the delegate; it is a task a GRU
or LSTM learns in a few hundred steps, so accuracy is far from chance and
quantization errors show up as changed predictions.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

FRAMES, FEATURES, CLASSES = 49, 10, 4


def make_task(n: int, seed: int, frames: int = FRAMES) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = 0.5 * torch.randn(n, frames, FEATURES, generator=g)
    t = torch.stack([torch.randperm(frames, generator=g)[:2] for _ in range(n)])  # two distinct frames
    sign = torch.randint(0, 2, (n,), generator=g)
    rows = torch.arange(n)
    x[rows, t[:, 0], 0] += 2.0
    x[rows, t[:, 1], 1] += torch.where(sign == 1, 2.0, -2.0)
    first_is_a = (t[:, 0] < t[:, 1]).long()
    return x, first_is_a * 2 + sign


class Classifier(nn.Module):
    def __init__(self, cell, hidden: int):
        super().__init__()
        self.rnn = cell(FEATURES, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, CLASSES)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1])


def train(cell, hidden: int, steps: int, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    model = Classifier(cell, hidden)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = make_task(4096, seed + 100)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        idx = torch.randint(0, len(x), (64,), generator=g)
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def evaluate(model: nn.Module, n_test: int = 500, calibration: int = 32) -> dict:
    """Accuracy of the float, convert_pt2e and .pte models on held-out sequences, and how
    often the .pte's top-1 equals convert_pt2e's."""
    import executorch.kernels.quantized  # noqa: F401  (q/dq out-variants, if anything stays on the CPU)

    from executorch_espnn import delegation_report, quantize, runtime, to_espnn_edge

    xc, _ = make_task(calibration, 7)
    example = (xc[:1],)
    q = quantize(model, example, [(xc[i:i + 1],) for i in range(calibration)])
    edge = to_espnn_edge(torch.export.export(q, example))
    report = delegation_report(edge).methods["forward"]
    program = runtime.load_program(edge.to_executorch().buffer)
    x, y = make_task(n_test, 8)
    hits = {"float": 0, "pt2e": 0, "pte": 0}
    agree = 0
    with torch.no_grad():
        for i in range(n_test):
            xi = x[i:i + 1]
            f, p = model(xi).argmax(), q(xi).argmax()
            d = runtime.run_pte(None, [xi], program=program)[0].argmax()
            hits["float"] += int(f == y[i])
            hits["pt2e"] += int(p == y[i])
            hits["pte"] += int(d == y[i])
            agree += int(d == p)
    out = {k: v / n_test for k, v in hits.items()}
    out["pte_agrees_with_pt2e"] = agree / n_test
    out["partitions"] = len(report.partitions)
    out["cpu_ops"] = len(report.cpu_ops)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=400, help="training steps (batch 64)")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--test", type=int, default=1000, help="held-out sequences")
    args = ap.parse_args()
    print(f"task: {FRAMES} frames x {FEATURES} features, {CLASSES} classes (chance 25%); "
          f"{args.steps} training steps, hidden {args.hidden}, {args.test} test sequences")
    print(f"{'model':6} {'train s':>8} {'float':>7} {'pt2e':>7} {'.pte':>7} {'.pte = pt2e':>12} partitions cpu_ops")
    for cell in (nn.GRU, nn.LSTM):
        t0 = time.perf_counter()
        model = train(cell, args.hidden, args.steps)
        secs = time.perf_counter() - t0
        r = evaluate(model, args.test)
        print(f"{cell.__name__:6} {secs:8.1f} {100 * r['float']:6.1f}% {100 * r['pt2e']:6.1f}% {100 * r['pte']:6.1f}% "
              f"{100 * r['pte_agrees_with_pt2e']:11.1f}% {r['partitions']:10d} {r['cpu_ops']:7d}")


if __name__ == "__main__":
    main()
