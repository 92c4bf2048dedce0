"""Digests of the frames and summaries of every shipped run config and of random configs, for
checking that a change of structure changes no result (byte-identical frames and summaries).

Each case runs three ways: the lazy decode lane on, off, and on with invariants checked after
every step (a shipped config's checked run keeps its first few hundred requests: checking every
step of a full Mooncake replay takes hours). A case's digest is the SHA-256 of its requests,
steps and ITL frames (values, index, column names and dtypes), its per-replica table (fleets)
and its summary as JSON.
The random configs are those of the fast-forward equivalence test
(``tests/engine/test_fastforward.py``'s ``_config``), drawn with ``numpy`` from the ranges of
its hypothesis strategy, so the same ``--random N`` gives the same configs on every commit.

    .venv/bin/python benchmarks/frame_digests.py --save before.json     # on the old commit
    .venv/bin/python benchmarks/frame_digests.py --against before.json  # on the new one

``--shipped-requests N`` keeps at most N requests of each shipped config (a quicker check on a
busy machine; the full Mooncake replays take half an hour each there). Prints one line per
differing case and a count; exit 1 when any case differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simkv.config.sim import SimConfig  # noqa: E402
from simkv.run import load_config, simulate  # noqa: E402

MODES = {"lane": (True, False), "plain": (False, False), "checked": (True, True)}
SHIPPED = ("configs/*.yaml", "configs/paper/*.yaml", "configs/measured/*.yaml")


def _frame_digest(frame: pd.DataFrame, sha: Any) -> None:
    sha.update(json.dumps([list(map(str, frame.columns)), list(map(str, frame.dtypes))]).encode())
    sha.update(pd.util.hash_pandas_object(frame, index=True).to_numpy().tobytes())


def digest(cfg: SimConfig, base: Path, mode: str) -> str:
    """The digest of one run of ``cfg`` in ``mode``."""
    fast, checked = MODES[mode]
    out = simulate(cfg, base, fast_forward=fast, check_invariants=checked)
    sha = hashlib.sha256()
    for frame in (out.requests, out.steps, out.itl):
        _frame_digest(frame, sha)
    if out.replicas is not None:
        _frame_digest(out.replicas, sha)
    sha.update(json.dumps(out.summary, sort_keys=True).encode())
    return sha.hexdigest()


def random_config(k: int) -> SimConfig:
    """The ``k``-th random config, drawn over the fast-forward test's strategy ranges."""
    from tests.engine.test_fastforward import _config

    rng = np.random.default_rng([20261203, k])
    pick = lambda *values: values[int(rng.integers(len(values)))]  # noqa: E731
    kind = pick("vllm_v1", "vllm_v0")
    budget = pick(256, 2048, 8192)
    return _config(
        int(rng.integers(0, 1001)), pick(0.5, 3.0, 12.0), int(rng.integers(1280, 12001)),
        pick(1, 4, 16, 32), pick("none", "hash", "radix"),
        max(budget, 1200) if kind == "vllm_v0" else budget, 60, pick(20, 120), kind,
        pick("newest", "oldest", "longest", "fewest_blocks", "lowest_priority"),
        pick("recompute", "swap"), pick(None, "fifo", "lifo"),
    )  # fmt: skip


def _cases(shipped: bool, random: int, limit: int | None) -> Iterator[tuple[str, str, int | None]]:
    if shipped:
        for pattern in SHIPPED:
            for path in sorted(ROOT.glob(pattern)):
                yield str(path.relative_to(ROOT)), "shipped", limit
    for k in range(random):
        yield f"random-{k}", "random", None


def shortened(path: Path, requests: int) -> list[str]:
    """Overrides keeping at most ``requests`` requests of a shipped config's workload."""
    text = path.read_text()
    if "num_requests" in text:
        return [f"workload.num_requests={requests}"]
    return [f"workload.limit={requests}"] if "kind: trace" in text else []


def _one(case: tuple[str, str, int | None]) -> dict[str, str]:
    name, kind, limit = case
    if kind == "shipped":
        path = ROOT / name
        cfg = load_config(path, shortened(path, limit) if limit else [])
        short = load_config(path, shortened(path, min(limit or 300, 300)))
        return {
            f"{name}:{mode}": digest(short if mode == "checked" else cfg, path.parent, mode)
            for mode in MODES
        }
    with tempfile.TemporaryDirectory() as tmp:
        cfg = random_config(int(name.split("-")[1]))
        return {f"{name}:{mode}": digest(cfg, Path(tmp), mode) for mode in MODES}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--random", type=int, default=150, help="random configs (default 150)")
    parser.add_argument("--no-shipped", action="store_true", help="random configs only")
    parser.add_argument(
        "--shipped-requests",
        type=int,
        metavar="N",
        help="keep at most N requests of each shipped config (default: all)",
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--save", type=Path, help="write the digests to this JSON file")
    parser.add_argument("--against", type=Path, help="compare with digests saved earlier")
    args = parser.parse_args()
    digests: dict[str, str] = {}
    cases = list(_cases(not args.no_shipped, args.random, args.shipped_requests))
    with ProcessPoolExecutor(args.jobs) as pool:
        for one in pool.map(_one, cases):
            digests.update(one)
            if args.save:  # as they come: an interrupted check keeps what it digested
                args.save.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
    print(f"{len(digests)} runs digested")
    if args.against:
        before = json.loads(args.against.read_text())
        keys = before.keys() | digests.keys()
        differ = sorted(k for k in keys if before.get(k) != digests.get(k))
        for key in differ:
            print(f"differs: {key}")
        print(f"{len(differ)} of {len(keys)} runs differ")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
