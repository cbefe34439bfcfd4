"""XTS3 serialization: the bytes the device runtime parses, from a graph and
its arena plan (planning: executorch_espnn.xts3_writer)."""

from .xts3_serializer import Xts3Serializer

__all__ = ["Xts3Serializer"]
