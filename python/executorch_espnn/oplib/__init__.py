"""Operator-library mode (docs/oplib.md): the device runtime's ops as ExecuTorch
custom ops ``espnn::*`` beside the delegate."""

from .lowering import OplibError, check_kernels, registered_kernels, to_espnn_oplib
from .operators import define_ops, oplib_ops

__all__ = ["OplibError", "check_kernels", "define_ops", "oplib_ops", "registered_kernels", "to_espnn_oplib"]
