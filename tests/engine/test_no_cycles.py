"""A run builds no reference cycles, so pausing the cyclic garbage collector during it
(``Engine.run``, ``Fleet.run``) costs no memory: after a run of every shipped config, with
the collector paused, there is no cyclic garbage to collect."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from simkv.run import build, load_config

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


def _shortened(path: Path) -> list[str]:
    """Overrides keeping a few hundred requests of the config's workload."""
    text = path.read_text()
    if "num_requests" in text:
        return ["workload.num_requests=400"]
    return ["workload.limit=1500"] if "kind: trace" in text else []


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_a_run_leaves_no_cyclic_garbage(path: Path) -> None:
    cfg = load_config(path, _shortened(path))
    run = build(cfg, path.parent)
    recorders = [replica.recorder for replica in run.replicas]
    gc.collect()
    # each pauses the collector itself (a fleet clears its replicas' hooks)
    (run.engine if run.fleet is None else run.fleet).run()
    assert gc.isenabled()
    gc.disable()
    try:
        found = gc.collect()
    finally:
        gc.enable()
    assert found == 0, f"{path.name}: {found} objects in reference cycles"
    assert sum(rec.num_done for rec in recorders) > 0
