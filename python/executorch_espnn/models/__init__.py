"""A small model zoo for examples, tests and the CLI.

Every function returns ``(model, example_inputs)``: an ``nn.Module`` in eval
mode and a tuple of example input tensors — the ``module:function`` contract
of ``espnn compile`` (``executorch_espnn.models:ds_cnn``). Weights are random
(deterministic from ``seed``; no pretrained weights ship); networks with batch
norm have their statistics settled on random inputs so int8 ranges look like a
trained network's (see ``settle_batch_norm``).

==========================  =====================  ===========================
function                    input                  on ESP-NN
==========================  =====================  ===========================
tiny_cnn()                  [1,3,32,32]            everything (the CLI default)
digits_cnn()                [1,1,8,8]              everything
ds_cnn()                    [1,1,49,10] MFCCs      everything
mobilenet_v2(...)           [1,3,224,224]          everything
mobilenet_v3_small(...)     [1,3,224,224]          everything (checked at 96x96)
small_vit(...)              [1,3,32,32]            everything (one delegate)
resnet8()                   [1,3,32,32]            everything
vww_mobilenet_v1(...)       [1,3,96,96]            everything
ad_autoencoder()            [1,640]                everything
har_cnn(...)                [1,9,128]              everything
tcn(...)                    [1,8,64]               everything
gru_kws(...)                [1,49,10] MFCCs        everything (one GRU record)
unet(...)                   [1,3,64,64]            everything
two_head_detector(...)      [1,3,96,96]            everything (two outputs)
==========================  =====================  ===========================

Not in ``ZOO`` (every ``ZOO`` model has a device test suite):
``se_net(...)`` [1,3,64,64], squeeze-excite bnecks for the fused-region
figures (benchmarks/schedules.py, tests/perf/test_model_figures.py).

torch is imported by this package (unlike ``executorch_espnn`` itself).
"""

from .blocks import conv_bn, make_divisible, settle_batch_norm
from .dense_prediction import TwoHeadDetector, UNet, two_head_detector, unet
from .ds_cnn import DSCNN, ds_cnn
from .mlperf_tiny import ADAutoencoder, MobileNetV1, ResNet8, ad_autoencoder, resnet8, vww_mobilenet_v1
from .mobilenet_v2 import InvertedResidual, MobileNetV2, mobilenet_v2
from .mobilenet_v3 import MobileNetV3Small, SENet, mobilenet_v3_small, se_net
from .sequence import GRUKWS, HARCNN, TCN, gru_kws, har_cnn, tcn
from .small import DigitsCNN, TinyCNN, digits_cnn, tiny_cnn
from .vit import SmallViT, small_vit

#: name -> zoo function, for tools that list the zoo.
ZOO = {f.__name__: f for f in (tiny_cnn, digits_cnn, ds_cnn, mobilenet_v2, mobilenet_v3_small, small_vit,
                                resnet8, vww_mobilenet_v1, ad_autoencoder, har_cnn, tcn, gru_kws, unet,
                                two_head_detector)}

__all__ = ["ZOO", "ADAutoencoder", "DSCNN", "DigitsCNN", "GRUKWS", "HARCNN", "InvertedResidual", "MobileNetV1",
           "MobileNetV2", "MobileNetV3Small", "ResNet8", "SENet", "SmallViT", "TCN", "TinyCNN", "TwoHeadDetector",
           "UNet", "ad_autoencoder", "conv_bn", "digits_cnn", "ds_cnn", "gru_kws", "har_cnn", "make_divisible",
           "mobilenet_v2", "mobilenet_v3_small", "resnet8", "se_net", "settle_batch_norm", "small_vit", "tcn",
           "tiny_cnn", "two_head_detector", "unet", "vww_mobilenet_v1"]
