"""User files as text, every problem located: a byte that is not UTF-8 is an
:class:`~simkv.errors.InputError` with its line, an unreadable file one with the file.

A ground module without heavy imports (config loading uses it: ``simkv --help`` stays light);
:mod:`simkv.tables` reads tables on top of it.
"""

from __future__ import annotations

from pathlib import Path

from simkv.errors import InputError

__all__ = ["decode_utf8", "read_text"]


def decode_utf8(raw: bytes, file: str) -> str:
    """``raw`` as UTF-8 text; a byte that is not UTF-8 is an :class:`InputError` with its line."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        message = f"not UTF-8 text (byte 0x{raw[err.start]:02x})"
        raise InputError(message, file=file, line=line) from None


def read_text(path: Path) -> str:
    """A file's UTF-8 text (a byte-order mark dropped); :class:`InputError` when unreadable."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", file=path) from None
    return decode_utf8(raw, str(path)).removeprefix("\ufeff")
