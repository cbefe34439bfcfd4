"""The one line a user reads for an exception: the library's QuantizationError
messages and every ``espnn: error: ...`` line are built with it."""

from __future__ import annotations


def one_line(e: BaseException | str, *, typed: bool = False, limit: int | None = None) -> str:
    """``e``'s text with its whitespace (newlines too) collapsed, cut at
    ``limit`` characters. ``typed``: prefixed with the exception's type name
    ("KeyError: 'x'"), or just the name when the text is empty."""
    text = " ".join(str(e).split())[:limit]
    if not typed:
        return text
    name = type(e).__name__
    return f"{name}: {text}" if text else name
