"""Output folders and files that a failing or interrupted command never damages.

A command that makes a folder (``run``, ``sweep``, ``capacity``, ``waste``) writes it whole
under a staging sibling ``.<name>.partial`` and publishes it with one rename
(:func:`new_output`): until then the folder's earlier content is untouched and readable; after,
it is the new output, nothing of the earlier one left beside it. A command that adds files to
a folder (``trace``, ``compare``, ``report``) writes each atomically in place under the folder's
lock (:func:`claim_folder`); one that writes a single file (``calibrate``'s profile, a
comparison page) claims it (:func:`claim_file`).

Each output folder holds a marker, ``.simkv-output`` (JSON: its ``kind`` and the ``files`` simkv
wrote there). A folder holding another kind of output, files simkv did not write, or a file
where a folder belongs is refused unless ``force``. Rules of a rerun into a folder of the same
kind: files simkv did not write are carried into the new folder (hard links: no copy);
the earlier run's own files are not (a rerun leaves no stale ``trace.json``); a sweep or a
capacity search also carries its run folders (``runs/``: what ``--resume`` and the search's
reuse are made of), and when interrupted keeps its staging folder, which the next command of
the same kind continues in. A staging folder of another kind, or one left by a dead ``run``, is
removed by the next command; a publication cut between its two renames is completed by it.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from simkv.errors import InputError
from simkv.outputs.faults import fault_point
from simkv.outputs.files import cannot, make_folder, remove, write_file
from simkv.outputs.lock import locked
from simkv.text import read_json_file

MARKER = ".simkv-output"


class Kind(StrEnum):
    """What made an output folder."""

    RUN = "run"
    SWEEP = "sweep"
    CAPACITY = "capacity"
    WASTE = "waste"
    CACHE_CURVE = "cache-curve"


INCREMENTAL = frozenset({Kind.SWEEP, Kind.CAPACITY})
"""Kinds whose run folders are carried into a rerun and whose staging survives an interrupt."""

LEGACY = (
    ("capacity.json", Kind.CAPACITY), ("sweep.json", Kind.SWEEP), ("sweep.parquet", Kind.SWEEP),
    ("summary.json", Kind.RUN), ("waste_static.csv", Kind.WASTE),
)  # fmt: skip
"""How a folder written before markers existed is recognised: its first file found here."""

FOREIGN = "foreign"
""":func:`output_kind` of a folder holding files no simkv command wrote."""


def _entries(folder: Path) -> set[str]:
    """Top-level names of ``folder``, without simkv's own hidden files."""
    try:
        names = {entry.name for entry in os.scandir(folder)}
    except OSError as err:
        raise cannot("list the folder", folder, err) from None
    return {n for n in names if n != MARKER and not (n.startswith(".") and n.endswith(".tmp"))}


def _marker(folder: Path) -> dict[str, Any] | None:
    try:
        data, _ = read_json_file(folder / MARKER)
    except (OSError, InputError):
        return None
    return data if isinstance(data, dict) and data.get("kind") in set(Kind) else None


def output_kind(path: Path) -> Kind | str | None:
    """The kind of output at ``path``: None when absent or an empty folder, ``"file"`` for a
    file, a :class:`Kind`, or :data:`FOREIGN`."""
    if not os.path.lexists(path):
        return None
    if not path.is_dir():
        return "file"
    marker = _marker(path)
    if marker is not None:
        return Kind(marker["kind"])
    names = _entries(path)
    if not names:
        return None
    return next((kind for name, kind in LEGACY if name in names), FOREIGN)


def _simkv_files(folder: Path) -> set[str]:
    """The names simkv wrote in ``folder``: its marker's list (every entry when no marker)."""
    marker = _marker(folder)
    return _entries(folder) if marker is None else set(marker.get("files", ()))


def _write_marker(folder: Path, kind: Kind, files: set[str], **more: Any) -> None:
    doc = {"kind": kind.value, "files": sorted(files), **more}
    write_file(folder / MARKER, json.dumps(doc, indent=1) + "\n")


def _describe(found: Kind | str) -> str:
    if found == "file":
        return "output is not a folder (a file is there)"
    if found == FOREIGN:
        return "holds files that are not a simkv output"
    return f"holds a {found} output"


def _real(path: Path) -> Path:
    """``path`` absolute, its symbolic links resolved (a link to a folder publishes there)."""
    return Path(os.path.realpath(path))


MAX_NAME_BYTES = 240
"""The longest output name: file systems allow 255 bytes, and staging adds ``.`` and
``.partial`` (a lock ``.`` and ``.lock``) to it."""


def _check_place(shown: Path, real: Path) -> None:
    if real.parent == real:
        raise InputError("an output cannot be the root folder", file=shown)
    if len(real.name.encode()) > MAX_NAME_BYTES:
        raise InputError(f"the output's name is longer than {MAX_NAME_BYTES} bytes", file=shown)
    if Path.cwd().resolve().is_relative_to(real):
        raise InputError("the output folder holds the current folder: choose another", file=shown)
    ancestor = real.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        raise InputError(f"cannot create the output under {ancestor}", file=shown)


def _sibling(real: Path, what: str) -> Path:
    return real.parent / f".{real.name}.{what}"


def _recover(real: Path) -> None:
    """Finish a publication cut between its renames: the earlier output comes back."""
    previous = _sibling(real, "previous")
    if os.path.lexists(previous):
        if not os.path.lexists(real):
            os.rename(previous, real)
        else:
            remove(previous)


def _carry(source: Path, target: Path, names: set[str]) -> None:
    """Hard-link ``names`` of ``source`` (files and folder trees) into ``target``."""
    for name in sorted(names):
        src, dst = source / name, target / name
        try:
            if src.is_dir() and not src.is_symlink():
                make_folder(dst)
                _carry(src, dst, {entry.name for entry in os.scandir(src)})
            elif src.is_symlink():
                os.symlink(os.readlink(src), dst)
            else:
                os.link(src, dst)
        except OSError as err:
            raise cannot("carry over", src, err) from None


@contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block is done (they are delivered after it)."""
    held = {signal.SIGINT, signal.SIGTERM}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _publish(staging: Path, real: Path, shown: Path) -> None:
    """Put ``staging`` in place of ``real`` (a folder or a file) with two renames."""
    previous = _sibling(real, "previous")
    with _signals_held():
        try:
            fault_point(real)
            if os.path.lexists(real):
                os.rename(real, previous)
            os.rename(staging, real)
        except OSError as err:
            _recover(real)
            raise cannot("publish the output", shown, err) from None
    remove(previous)


def _start(staging: Path, real: Path, kind: Kind, found: Kind | str | None) -> None:
    """A fresh staging folder, carrying what a rerun of ``kind`` keeps from ``real``."""
    remove(staging)
    make_folder(staging)
    carried: set[str] = set()
    if found == kind:
        ours = _simkv_files(real)
        carried = _entries(real) - ours
        keep = {n for n in ours if kind in INCREMENTAL and (real / n).is_dir()}
        _carry(real, staging, carried | keep)
    _write_marker(staging, kind, set(), carried=sorted(carried))


@dataclass
class Staging:
    """The folder a new output is written into (``path``), and whether ``out`` held an earlier
    output of the same kind (``earlier``). Set ``keep`` to leave it unpublished: the earlier
    output stays, and this one waits in ``path`` for the next command of its kind (a sweep or
    a search whose runs failed over a complete earlier one)."""

    path: Path
    earlier: bool
    keep: bool = False


def published_name(path: Path) -> str:
    """The name of the output that ``path`` (a staging folder or the output itself) becomes."""
    name = path.name
    if name.startswith(".") and name.endswith(".partial"):
        return name[1 : -len(".partial")]
    return name


def _missing_parents(real: Path) -> list[Path]:
    """The ancestors of ``real`` that do not exist yet, nearest first."""
    return [p for p in real.parents if not p.exists()]


@contextmanager
def new_output(out: Path, kind: Kind, *, force: bool = False) -> Iterator[Staging]:
    """Claim ``out`` for a new output of ``kind`` and yield its :class:`Staging` folder;
    publish it as ``out`` when the block ends normally (unless ``keep``). :class:`InputError`
    when ``out`` is in use, or holds another kind of output (or foreign files, or is a file)
    and not ``force``. A failure leaves no folder this call created."""
    real = _real(out)
    _check_place(out, real)
    created = _missing_parents(real)
    make_folder(real.parent)
    try:
        with locked(real, shown=out):
            _recover(real)
            found = output_kind(real)
            if found is not None and found != kind and not force:
                raise InputError(
                    f"{_describe(found)}: give another --out, or --force to replace it", file=out
                )
            with _staged(real, out, kind, found) as staging:
                yield staging
    except BaseException:
        for parent in created:
            with suppress(OSError):
                parent.rmdir()  # only if empty: what this call made and nothing else
        raise


@contextmanager
def _staged(real: Path, out: Path, kind: Kind, found: Kind | str | None) -> Iterator[Staging]:
    staging = Staging(_sibling(real, "partial"), earlier=found == kind)
    marker = _marker(staging.path) if staging.path.is_dir() else None
    try:
        if not (kind in INCREMENTAL and marker is not None and marker["kind"] == kind):
            _start(staging.path, real, kind, found)
        yield staging
        if not staging.keep:
            carried = set((_marker(staging.path) or {}).get("carried", ()))
            _write_marker(staging.path, kind, _entries(staging.path) - carried)
            _publish(staging.path, real, out)
    except KeyboardInterrupt:
        if kind not in INCREMENTAL:
            remove(staging.path)
        raise
    except InputError as err:
        remove(staging.path)
        raise _as_shown(err, staging.path, out) from None
    except BaseException:
        remove(staging.path)
        raise


def _as_shown(err: InputError, staging: Path, out: Path) -> InputError:
    """``err`` naming the file the user will know (``out/...``), not its staging twin."""
    if err.file is None or not Path(err.file).is_relative_to(staging):
        return err
    shown = out / Path(err.file).relative_to(staging)
    return InputError(err.message, file=shown, line=err.line, field=err.field, also=err.also)


@contextmanager
def claim_folder(folder: Path) -> Iterator[Path]:
    """Lock an existing output folder to add files to it in place (each written with
    :func:`~simkv.outputs.files.write_file`); the marker learns their names. A failure removes
    the files the block added, so the folder is as it was."""
    real = _real(folder)
    with locked(real, shown=folder):
        _recover(real)
        before = _entries(real) if real.is_dir() else set()
        try:
            yield real
            marker = _marker(real)
            added = _entries(real) - before if real.is_dir() else set()
            if marker is not None and added:
                _write_marker(real, Kind(marker["kind"]), set(marker.get("files", ())) | added)
        except BaseException:
            for name in _entries(real) - before if real.is_dir() else ():
                remove(real / name)
            raise


@contextmanager
def claim_file(
    path: Path, recognise: Callable[[Path], bool], what: str, *, force: bool = False
) -> Iterator[Path]:
    """Lock ``path`` to write one output file there; :class:`InputError` when it is a folder,
    or a file that ``recognise`` does not take for ``what`` and not ``force``."""
    real = _real(path)
    if real.is_dir():
        raise InputError(f"is a folder, not {what}", file=path)
    _check_place(path, real)
    make_folder(real.parent)
    with locked(real, shown=path):
        if real.exists() and not force and not recognise(real):
            raise InputError(
                f"holds a file that is not {what}: give another path, or --force to replace it",
                file=path,
            )
        yield real
