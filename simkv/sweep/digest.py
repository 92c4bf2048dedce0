"""A sweep run's digest: what its id and its DONE marker stand for.

The sha256 of the resolved config YAML and of the content of every file the config names (each
``path`` key: trace, step table, empirical lengths, measured run folder; a calibration profile
is already expanded into the resolved values). Editing any of them changes the digest, so a
resumed sweep re-runs exactly the runs whose inputs changed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from simkv.config.sim import SimConfig


def _hash_path(path: Path) -> str:
    """sha256 of a file's bytes, or of a folder's files (relative names and bytes, in order);
    ``missing`` when it cannot be read (the run fails and says so)."""
    digest = hashlib.sha256()
    try:
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            digest.update(str(file.relative_to(path) if file != path else "").encode() + b"\0")
            with file.open("rb") as stream:
                for chunk in iter(lambda: stream.read(1 << 20), b""):
                    digest.update(chunk)
    except OSError:
        return "missing"
    return digest.hexdigest()


def _named_paths(data: Any) -> list[str]:
    """The values of every ``path`` key of a resolved config (files the run reads)."""
    if isinstance(data, dict):
        found = [v for k, v in data.items() if k == "path" and isinstance(v, str)]
        return found + [p for v in data.values() for p in _named_paths(v)]
    if isinstance(data, list):
        return [p for v in data for p in _named_paths(v)]
    return []


def run_digest(config: SimConfig, text: str, base_dir: Path, cache: dict[str, str]) -> str:
    """sha256 of the resolved config ``text`` and of the files it names (``cache``: path →
    content hash, shared by a sweep's runs)."""
    digest = hashlib.sha256(text.encode())
    for name in _named_paths(config.model_dump(mode="json")):
        if name not in cache:
            cache[name] = _hash_path(base_dir / name)
        digest.update(f"\n# {name}: {cache[name]}".encode())
    return digest.hexdigest()
