"""executorch_espnn.quantize (the PT2E flow in one call) and the helpers that
read a lowered program: delegate_payloads, output_scales."""

import pytest

pytest.importorskip("executorch")

import torch  # noqa: E402
from torch import nn  # noqa: E402

import executorch_espnn  # noqa: E402
from executorch_espnn import (  # noqa: E402
    QuantizationError, delegate_payloads, output_scales, quantize, to_espnn_edge)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).mean(dim=(2, 3)))


def batches(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(2, 3, 8, 8, generator=g),) for _ in range(n)]


def model():
    torch.manual_seed(0)
    return ConvNet()


def test_quantize_is_the_torchao_flow_with_espnn_quantizer():
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    calibration = batches(3)
    example = calibration[0]
    m = model()
    got = quantize(m, example, calibration)
    assert not m.training  # exported in eval mode and left there

    prepared = prepare_pt2e(torch.export.export(model().eval(), example).module(check_guards=False),
                            executorch_espnn.EspNNQuantizer())
    for batch in calibration:
        prepared(*batch)
    want = convert_pt2e(prepared)
    (x,) = batches(1, seed=7)[0]
    assert torch.equal(got(x), want(x))
    assert output_scales(got) == output_scales(want)
    assert output_scales(got)[0] is not None


def test_quantize_takes_any_iterable_and_list_inputs():
    gen = (b for b in batches(2))  # a generator, consumed once
    q = quantize(model(), list(batches(1)[0]), gen)
    assert any("quantize_per_tensor" in str(n.target) for n in q.graph.nodes)


def test_qat_trains_the_fake_quantized_model_then_converts():
    seen = []

    def train(prepared):
        assert prepared.training
        seen.append({type(mod).__name__ for mod in prepared.modules()})
        opt = torch.optim.SGD(prepared.parameters(), lr=1e-3)
        for (x,) in batches(2, seed=3):
            prepared(x).square().mean().backward()
            opt.step()
            opt.zero_grad()

    m = model()
    q = quantize(m, batches(1)[0], None, qat=train)
    assert len(seen) == 1 and "FakeQuantize" in " ".join(seen[0])
    assert not m.training
    assert output_scales(q)[0] is not None
    edge = to_espnn_edge(torch.export.export(q, batches(1)[0]), allow_cpu_fallback=False)
    assert len(delegate_payloads(edge)) == 1


@pytest.mark.parametrize("example, message", [
    (torch.randn(2, 3, 8, 8), r"example_inputs must be a tuple .*\(x,\)"),
    ({"x": torch.randn(2, 3, 8, 8)}, "example_inputs must be a tuple"),
])
def test_example_inputs_must_be_a_tuple(example, message):
    with pytest.raises(TypeError, match=message):
        quantize(model(), example, batches(1))


def test_calibration_errors_say_what_to_pass():
    example = batches(1)[0]
    with pytest.raises(ValueError, match="calibration is required"):
        quantize(model(), example, None)
    with pytest.raises(ValueError, match="calibration gave no batches"):
        quantize(model(), example, [])
    with pytest.raises(TypeError, match=r"calibration batch 0 is a Tensor.*\(x,\)"):
        quantize(model(), example, [torch.randn(2, 3, 8, 8)])  # would unpack along the batch dimension
    with pytest.raises(TypeError, match="iterable of input tuples"):
        quantize(model(), example, 3)
    with pytest.raises(TypeError, match="qat must be a callable"):
        quantize(model(), example, None, qat=True)
    with pytest.raises(TypeError, match="torch.nn.Module"):
        quantize(lambda x: x, example, batches(1))


def test_failures_name_the_step():
    example = batches(1)[0]
    with pytest.raises(QuantizationError, match="calibration batch 1 failed") as e:
        quantize(model(), example, [example, (torch.randn(2, 5, 8, 8),)])
    assert e.value.step == "calibrate" and e.value.batch == 1 and e.value.__cause__ is not None

    class DataDependent(nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x

    with pytest.raises(QuantizationError, match="torch.export of the model failed") as e:
        quantize(DataDependent(), example, [example])
    assert e.value.step == "export"


def test_delegate_payloads_and_output_scales_of_a_lowered_program():
    from executorch_espnn import EspNNQuantizer, _native

    example = batches(1)[0]
    float_head = EspNNQuantizer().set_module_name("fc", None)  # the linear stays float, on the CPU
    q = quantize(model(), example, batches(2), quantizer=float_head)
    assert output_scales(q) == [None]
    edge = to_espnn_edge(torch.export.export(q, example))
    (payload,) = delegate_payloads(edge)
    assert isinstance(payload, bytes) and payload[:4] == b"XTS3"
    assert "CONV2D" in [op["op"] for op in _native.Program(payload).summary()["ops"]]
    assert delegate_payloads(edge.exported_program()) == [payload]
    assert delegate_payloads(edge.to_executorch()) == [payload]
