"""One output file, written so that no reader ever sees it half written.

:func:`write_file` writes a temporary sibling (``.<name>.<pid>.tmp``) and renames it over the
file: the file holds either its old bytes or the new ones, whatever stops the process. Every
operating-system error becomes an :class:`~simkv.errors.InputError` naming the path and the
operation (:func:`cannot`), never a bare "No space left on device".
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from simkv.errors import InputError
from simkv.outputs.faults import fault_point

Content = str | bytes | Callable[[BinaryIO], None]
"""Text (written as UTF-8), bytes, or a function writing to the open binary file."""


def cannot(operation: str, path: Path | str | None, err: OSError) -> InputError:
    """The one line of an OS error: what could not be done, to which path (when known), and
    why."""
    reason = err.strerror or str(err) or type(err).__name__
    return InputError(f"cannot {operation}: {reason}", file=path)


def write_file(path: Path, content: Content) -> Path:
    """Write ``content`` to ``path`` atomically (temporary sibling, then one rename); returns
    ``path``. An OS error is an :class:`InputError` naming ``path``; the temporary file never
    outlives a failure this process survives."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temp, "wb") as handle:
            if callable(content):
                content(handle)
            else:
                handle.write(content.encode("utf-8") if isinstance(content, str) else content)
        fault_point(path)
        os.replace(temp, path)
    except BaseException as err:
        remove(temp)
        if isinstance(err, OSError):
            raise cannot("write", path, err) from None
        raise
    return path


def make_folder(path: Path) -> Path:
    """``path`` as a folder (parents too); an OS error is an :class:`InputError` naming it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise cannot("create the folder", path, err) from None
    return path


def remove(path: Path) -> None:
    """Remove a file or a folder tree if it is there, quietly: used for leftovers only."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except OSError:
        pass
