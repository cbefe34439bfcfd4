"""The parsed blob as the analysis sees it: the native parser's summary."""

from __future__ import annotations

from .. import _native


def parse(blob_or_summary) -> dict:
    """The native summary of `blob_or_summary` (bytes are parsed and
    validated by the device parser; a summary dict is passed through)."""
    if isinstance(blob_or_summary, dict):
        return blob_or_summary
    return _native.parse(bytes(blob_or_summary))
