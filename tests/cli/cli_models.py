"""Small models and data functions for the CLI tests (module:function targets)."""

import torch
from torch import nn


class CumsumIsland(nn.Module):
    """conv | cumsum (no ESP-NN lowering: stays on the CPU, in float) | conv."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x):
        return self.c2(torch.cumsum(torch.relu(self.c1(x)), dim=1))


def cumsum_island():
    torch.manual_seed(0)
    return CumsumIsland().eval(), (torch.randn(1, 3, 8, 8),)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def mlp():
    torch.manual_seed(0)
    return Mlp().eval(), (torch.randn(1, 16),)


def mlp_train_data():
    """(inputs, labels) batches: the class is the argmax of the first 4 features."""
    g = torch.Generator().manual_seed(1)
    for _ in range(16):
        x = torch.randn(1, 16, generator=g)
        yield x, x[:, :4].argmax(-1)


def unlabelled_batches():
    g = torch.Generator().manual_seed(2)
    for _ in range(3):
        yield torch.randn(1, 16, generator=g)


def wrong_shape_batches():
    yield torch.randn(1, 15)


def broken():
    raise RuntimeError("the model zoo is on fire")


def not_a_pair():
    return Mlp()


class DataDependent(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # data-dependent control flow: torch.export refuses it
            return x * 2
        return x


def data_dependent():
    return DataDependent(), (torch.randn(1, 4),)


def vit_one_block():
    """The zoo's small ViT, reduced (one block): fully delegated since LAYER_NORM and BATCH_MATMUL."""
    from executorch_espnn.models import small_vit

    return small_vit(image_size=16, patch_size=4, dim=32, depth=1, heads=2)



def mobilenet_v2_96():
    """The zoo's MobileNetV2 (width 0.5, 96x96, 10 classes): the whole
    architecture (17 inverted residual blocks) at a size a test can afford."""
    from executorch_espnn.models import mobilenet_v2

    return mobilenet_v2(num_classes=10, resolution=96, width_mult=0.5)


class OffPathKws(nn.Module):
    """A keyword-spotting-style CNN (1x1x49x10 spectrogram) with one conv that
    misses ESP32-S3's SIMD routines among ordinary ones: dilated with a stride
    on the dilated axis, the interpreter's own direct loop (grouped and
    stride-1 dilated convs are staged onto the dense kernel); the report must
    say which layer and why."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 16, (10, 4), stride=(2, 2), padding=(5, 1))
        self.d = nn.Conv2d(16, 32, 3, stride=2, padding=2, dilation=2)
        self.c3 = nn.Conv2d(32, 32, 1)
        self.fc = nn.Linear(32, 12)

    def forward(self, x):
        x = torch.relu(self.c1(x))
        x = torch.relu(self.d(x))
        x = torch.relu(self.c3(x))
        return self.fc(x.mean(dim=(2, 3)))


def offpath_kws():
    torch.manual_seed(0)
    return OffPathKws().eval(), (torch.randn(1, 1, 49, 10),)


class TokenClassifier(nn.Module):
    """An int64 token-id input (an embedding first): data for it must be integers."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(32, 8)
        self.fc = nn.Linear(8 * 16, 4)

    def forward(self, ids):
        return self.fc(self.emb(ids).flatten(1))


def int_input():
    torch.manual_seed(0)
    return TokenClassifier().eval(), (torch.randint(0, 32, (1, 16)),)


class CpuMix(nn.Module):
    """What the reports must count alike from the Edge program (compile) and
    the .pte (report): CPU ops with getitems (sort and topk have two
    outputs), a view ExecuTorch aliases, quantize/dequantize left on the CPU
    (an avg pool without padding counted feeds a flip), twelve cumsums with
    one reason (one group), float CPU tensors larger than an ESP32's internal
    RAM, and two outputs (top-1 means nothing)."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1, padding_mode="reflect")
        self.pool = nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
        self.c2 = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x):
        y = self.c2(torch.flip(self.pool(torch.relu(self.c1(x))), [3]))
        for _ in range(12):
            y = torch.cumsum(y, 1)
        s = torch.sort(y.view(1, -1), dim=1)[0]
        return s, torch.topk(s, 3)[0]


def cpu_mix():
    torch.manual_seed(0)
    return CpuMix().eval(), (torch.randn(1, 3, 128, 128),)


class Autoencoder(nn.Module):
    """An MLPerf Tiny anomaly-detection style FC autoencoder: its output has
    the input's shape, so top-1 agreement means nothing."""

    def __init__(self, n: int = 64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n, 16), nn.ReLU(), nn.Linear(16, n))

    def forward(self, x):
        return self.net(x)


def autoencoder():
    torch.manual_seed(0)
    return Autoencoder().eval(), (torch.randn(1, 64),)


class FloatFirst(nn.Module):
    """cumsum on the input (no ESP-NN lowering: a float op on the CPU) before a conv: the
    input feeds no quantize, so it cannot be handed over as int8."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return self.c(torch.cumsum(x, dim=1))


def float_first():
    torch.manual_seed(0)
    return FloatFirst().eval(), (torch.randn(1, 3, 8, 8),)
