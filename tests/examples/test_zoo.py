"""The model zoo keeps the `module:function` contract (eval-mode module,
tuple of example inputs, deterministic) and its networks are the published
architectures (parameter counts of the reference implementations)."""

import pytest

torch = pytest.importorskip("torch")

from executorch_espnn import models  # noqa: E402

# Small settings so the contract check stays fast; the full-size networks are below.
FAST = {"mobilenet_v2": {"resolution": 64}, "mobilenet_v3_small": {"resolution": 64}}
OUTPUTS = {"tiny_cnn": 10, "digits_cnn": 10, "ds_cnn": 12, "mobilenet_v2": 1000, "mobilenet_v3_small": 1000,
           "small_vit": 10}


@pytest.mark.parametrize("name", sorted(models.ZOO))
def test_zoo_function_returns_eval_module_and_input_tuple(name):
    model, example = models.ZOO[name](**FAST.get(name, {}))
    assert isinstance(model, torch.nn.Module) and not model.training
    assert isinstance(example, tuple) and all(isinstance(x, torch.Tensor) for x in example)
    with torch.no_grad():
        out = model(*example)
    assert out.shape == (1, OUTPUTS[name])
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
