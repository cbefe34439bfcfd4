"""executorch-espnn: ExecuTorch backend for Espressif's ESP-NN int8 kernels.

``executorch_espnn._native`` is the device runtime (XTS3 parser and int8
interpreter, the same C++ that runs on the ESP32) compiled for the host.
"""

__version__ = "0.1.0"
