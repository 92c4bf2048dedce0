"""vllm_v1's memory of a blocked waiting head (``VllmV1Scheduler._blocked``) changes nothing:
runs where it is never set give identical frames, with hash and radix prefix caching and tight
memory (heads blocked, admitted, preempted and re-admitted with cache hits)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
import pytest

from simkv.config.sim import SimConfig
from simkv.engine.memory.prefix import PrefixPart
from tests.engine.helpers import build_engine


def _config(seed: int, caching: str, reuse: str, blocks: int, victim: str = "newest") -> SimConfig:
    """Requests without content (their keys hit only themselves), memory for a few of them."""
    return SimConfig.model_validate({
        "name": "blocked", "seed": seed,
        "workload": {
            "kind": "synthetic", "num_requests": 300,
            "arrival": {"kind": "poisson", "rate": 10.0},
            "prompt_tokens": {"kind": "lognormal", "mean": 500, "median": 300, "max": 1500},
            "output_tokens": {"kind": "lognormal", "mean": 150, "median": 90, "max": 600},
        },
        "model": {"preset": "llama-2-7b", "max_model_len": 2200},
        "gpu": "a100-40gb",
        "kv_cache": {"block_size": 16, "num_blocks": blocks, "prefix_caching": caching,
                     "reuse": reuse},
        "scheduler": {"kind": "vllm_v1", "max_num_batched_tokens": 1024},
        "preemption": {"victim": victim},
    })  # fmt: skip


def _frames(cfg, base: Path):  # type: ignore[no-untyped-def]
    engine, _ = build_engine(cfg, base)
    engine.run()
    return engine.recorder.frames()


@pytest.mark.parametrize(
    ("caching", "reuse"), [("none", "fifo"), ("hash", "fifo"), ("hash", "lifo"), ("radix", "fifo")]
)
@pytest.mark.parametrize(
    ("seed", "blocks", "victim"),
    [(3, 260, "newest"), (11, 260, "newest"), (5, 140, "newest"), (7, 400, "newest"),
     (3, 260, "oldest"), (5, 140, "longest")],  # what-if victims: held requests (vllm_v1)
)  # fmt: skip
def test_remembering_a_blocked_head_changes_nothing(
    caching: str, reuse: str, seed: int, blocks: int, victim: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    cfg = _config(seed, caching, reuse, blocks, victim)
    remembered: list[bool] = []
    cannot_hit = PrefixPart.cannot_hit

    def counting(self: PrefixPart, seq) -> bool:  # type: ignore[no-untyped-def]
        remembered.append(cannot_hit(self, seq))
        return remembered[-1]

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        monkeypatch.setattr(PrefixPart, "cannot_hit", counting)
        with_memory = _frames(cfg, base)
        monkeypatch.setattr(PrefixPart, "cannot_hit", lambda self, seq: False)
        without = _frames(cfg, base)
    assert sum(remembered) > 20  # heads were remembered ...
    assert with_memory.steps["preempted"].sum() > 10  # ... and requests came back
    pd.testing.assert_frame_equal(with_memory.requests, without.requests, check_exact=True)
    pd.testing.assert_frame_equal(with_memory.steps, without.steps, check_exact=True)
    pd.testing.assert_frame_equal(with_memory.itl, without.itl, check_exact=True)
