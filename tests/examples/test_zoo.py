"""The model zoo keeps the `module:function` contract (eval-mode module,
tuple of example inputs, deterministic) and its networks are the published
architectures (parameter counts of the reference implementations)."""

import pytest

torch = pytest.importorskip("torch")

from executorch_espnn import models  # noqa: E402

# Small settings so the contract check stays fast; the full-size networks are below.
FAST = {"mobilenet_v2": {"resolution": 64}, "mobilenet_v3_small": {"resolution": 64}}
# Output shapes (a tuple of them for several outputs), at the FAST settings.
OUTPUTS = {"tiny_cnn": (1, 10), "digits_cnn": (1, 10), "ds_cnn": (1, 12), "mobilenet_v2": (1, 1000),
           "mobilenet_v3_small": (1, 1000), "small_vit": (1, 10), "resnet8": (1, 10), "vww_mobilenet_v1": (1, 2),
           "ad_autoencoder": (1, 640), "har_cnn": (1, 6), "tcn": (1, 10), "gru_kws": (1, 12),
           "unet": (1, 2, 64, 64), "two_head_detector": ((1, 6, 6, 6), (1, 12, 6, 6))}


@pytest.mark.parametrize("name", sorted(models.ZOO))
def test_zoo_function_returns_eval_module_and_input_tuple(name):
    model, example = models.ZOO[name](**FAST.get(name, {}))
    assert isinstance(model, torch.nn.Module) and not model.training
    assert isinstance(example, tuple) and all(isinstance(x, torch.Tensor) for x in example)
    with torch.no_grad():
        out = model(*example)
    shape = tuple(o.shape for o in out) if isinstance(out, tuple) else out.shape
    assert shape == OUTPUTS[name]
    # Deterministic: the same call gives the same weights and inputs,
    # and the caller's global RNG is left alone.
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    model2, example2 = models.ZOO[name](**FAST.get(name, {}))
    assert torch.equal(torch.rand(1), before)
    assert all(torch.equal(a, b) for a, b in zip(example, example2))
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), model2.state_dict().values()))


def n_params(model):
    return sum(p.numel() for p in model.parameters())


def test_architectures_match_the_reference_parameter_counts():
    # torchvision's mobilenet_v2() / mobilenet_v3_small() (1000 classes) and the
    # MLPerf Tiny DS-CNN (64 channels, 12 classes) parameter counts.
    assert n_params(models.MobileNetV2()) == 3_504_872
    assert n_params(models.MobileNetV3Small()) == 2_542_856
    assert n_params(models.DSCNN()) == 23_180  # conv weights without bias + BN affine + FC


def test_mlperf_tiny_architectures_follow_their_published_descriptions():
    # ResNet-8: a 3x3 conv (16) + 2 x 3x3 convs per stack (16, 32, 64), 1x1 projection
    # shortcuts where the stride is 2, BN after each 3x3 conv, a 64 -> 10 linear.
    convs3 = [3 * 16] + [16 * 16] * 2 + [16 * 32, 32 * 32, 32 * 64, 64 * 64]
    bn = 2 * (16 + 2 * 16 + 2 * 32 + 2 * 64)
    assert n_params(models.ResNet8()) == 9 * sum(convs3) + bn + (16 * 32 + 32) + (32 * 64 + 64) + 64 * 10 + 10
    # VWW: MobileNetV1 x 0.25 (8 channels after the stem; 13 depthwise-separable blocks to 256), BN + ReLU, 2 classes.
    chans = [8, 16, 32, 32, 64, 64, 128, 128, 128, 128, 128, 128, 256, 256]
    dw_pw = sum(9 * c + 2 * c + c * d + 2 * d for c, d in zip(chans, chans[1:]))
    assert n_params(models.MobileNetV1()) == 27 * 8 + 2 * 8 + dw_pw + 256 * 2 + 2
    # AD: dense 640 -> 128 x4 -> 8 -> 128 x4 -> 640, BN + ReLU after every layer but the last.
    widths = [640, 128, 128, 128, 128, 8, 128, 128, 128, 128, 640]
    dense = sum(a * b + b for a, b in zip(widths, widths[1:]))
    assert n_params(models.ADAutoencoder()) == dense + 2 * sum(widths[1:-1])
    # GRU keyword spotter: GRU(10 -> 64) (3 gates, input and hidden weights and biases), linear to 12.
    assert n_params(models.GRUKWS()) == 3 * (64 * 10 + 64 * 64 + 2 * 64) + 64 * 12 + 12


def test_input_shapes_follow_the_arguments():
    _, (x,) = models.mobilenet_v2(num_classes=5, resolution=96, width_mult=0.35)
    assert x.shape == (1, 3, 96, 96)
    _, (x,) = models.ds_cnn()
    assert x.shape == (1, 1, 49, 10)
    _, (x,) = models.digits_cnn()
    assert x.shape == (1, 1, 8, 8) and 0 <= x.min() and x.max() <= 1
    with pytest.raises(ValueError, match="multiple of 32"):
        models.mobilenet_v2(resolution=100)
    with pytest.raises(ValueError, match="patch_size"):
        models.small_vit(image_size=30, patch_size=4)
    assert models.vww_mobilenet_v1()[1][0].shape == (1, 3, 96, 96)
    assert models.gru_kws()[1][0].shape == (1, 49, 10)
    assert models.tcn(inputs=24, steps=100)[1][0].shape == (1, 24, 100)
    assert models.unet(resolution=32)[0](models.unet(resolution=32)[1][0]).shape == (1, 2, 32, 32)
    with pytest.raises(ValueError, match="multiple of 32"):
        models.vww_mobilenet_v1(resolution=100)
    with pytest.raises(ValueError, match="multiple of 4"):
        models.unet(resolution=30)
    with pytest.raises(ValueError, match="multiple of 16"):
        models.two_head_detector(resolution=40)


def test_grayscale_vww_is_the_person_detection_graph():
    # TensorFlow Lite Micro's person_detection model: [1,96,96,1] int8 input, a 3x3 stride-2 stem to 48x48x8,
    # 13 depthwise-separable blocks (ReLU6) ending at 3x3x256, a 3x3 average pool, a 256 -> 2 classifier and a
    # softmax. The feature-map shapes after each block are those of its graph.
    model, (x,) = models.vww_mobilenet_v1(grayscale=True)
    assert x.shape == (1, 1, 96, 96)
    shapes, relu6 = [], 0
    with torch.no_grad():
        y = x
        for layer in model.features:
            y = layer(y)
            shapes.append(tuple(y.shape[1:]))
            relu6 += isinstance(layer[-1], torch.nn.ReLU6)
        out = model(x)
    assert shapes[0] == (8, 48, 48) and relu6 == len(model.features) == 27
    pointwise = shapes[2::2]
    assert pointwise == [(16, 48, 48), (32, 24, 24), (32, 24, 24), (64, 12, 12), (64, 12, 12)] + \
        [(128, 6, 6)] * 6 + [(256, 3, 3)] * 2
    assert out.shape == (1, 2) and torch.allclose(out.sum(), torch.tensor(1.0))
    # The RGB model of the zoo is unchanged: logits, ReLU.
    rgb, (x3,) = models.vww_mobilenet_v1()
    assert x3.shape == (1, 3, 96, 96) and isinstance(rgb.features[0][-1], torch.nn.ReLU) and not rgb.softmax
