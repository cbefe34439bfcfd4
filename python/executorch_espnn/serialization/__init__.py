"""XTS3 serialization: the bytes the device runtime parses."""

from .xts3_writer import Xts3Writer

__all__ = ["Xts3Writer"]
