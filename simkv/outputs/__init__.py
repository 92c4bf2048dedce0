"""Outputs that are never lost: atomic files, locked folders published by one rename.

Every command writes through this package (:mod:`simkv.outputs.files` for one file,
:mod:`simkv.outputs.folders` for an output folder, :mod:`simkv.outputs.lock` for the lock);
:mod:`simkv.outputs.faults` is the test-only hook that fails a chosen write step.
"""

from simkv.outputs.files import cannot, make_folder, remove, write_file
from simkv.outputs.folders import (
    Kind,
    Staging,
    claim_file,
    claim_folder,
    new_output,
    output_kind,
    published_name,
)
from simkv.outputs.lock import FolderInUse, locked

__all__ = [
    "FolderInUse",
    "Kind",
    "Staging",
    "cannot",
    "claim_file",
    "claim_folder",
    "locked",
    "make_folder",
    "new_output",
    "output_kind",
    "published_name",
    "remove",
    "write_file",
]  # fmt: skip
