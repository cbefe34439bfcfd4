"""Zoo models at sizes an emulated ESP32-S3 (and, for DS-CNN, a plain ESP32)
runs from the runner's data partition: ten classes instead of 1000 keep the
classifier weights inside the 2 MiB partition; small inputs keep arena and scratch inside the
runner's internal-RAM pool."""

from executorch_espnn import models as M


def ds_cnn():
    return M.ds_cnn()


def mobilenet_v2_05_96():
    return M.mobilenet_v2(num_classes=10, resolution=96, width_mult=0.5)


def mobilenet_v2_05_64():
    """MobileNetV2-0.5 at 64x64: with ESP-NN's S3 scratch it fits an ESP32-S3
    without PSRAM (at 96x96 the S3 build needs 147,456 B of arena plus
    207,424 B of ESP-NN scratch, more than the largest free block)."""
    return M.mobilenet_v2(num_classes=10, resolution=64, width_mult=0.5)


def mobilenet_v3_small_96():
    return M.mobilenet_v3_small(num_classes=10, resolution=96)
