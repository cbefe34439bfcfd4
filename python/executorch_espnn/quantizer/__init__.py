"""PT2E quantizer for ESP-NN's int8 scheme (needs torch and torchao).

``EspNNQuantizer`` annotates a ``torch.export`` graph for ``prepare_pt2e`` /
``prepare_qat_pt2e``; ``get_espnn_quantization_config`` builds the configs it takes.
"""

from .config import EspNNQuantizationConfig, get_espnn_quantization_config
from .quantizer import EspNNQuantizer

__all__ = ["EspNNQuantizer", "EspNNQuantizationConfig", "get_espnn_quantization_config"]
