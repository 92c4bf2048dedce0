"""Scenarios for the vLLM reference: engine knobs and requests given as token ids, arriving
at engine steps; and a seeded generator of random ones.

Standard library only: the recorder imports this module inside vLLM's own virtualenv, the
replay inside simkv's.

A scenario is one JSON object::

    {"name": "s0007", "family": "preempt",
     "engine": {"block_size": 32, "num_blocks": 12, "max_model_len": 512, ...},
     "requests": [{"prompt": [17, 4, ...], "output": 9, "step": 0, "priority": 0}, ...]}

``step`` is the engine step the request arrives before: steps are counted from 0 and only
steps that scheduled work count (a step that only preempted, or an idle engine, does not
advance the clock), and an idle engine jumps to the next arrival step. Requests are added in
list order, which is (step, position) order. ``num_blocks`` counts vLLM's null block 0.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

VOCAB = 32_000  # token ids are drawn below the tiny model's vocabulary (tiny-llama/config.json)
FAMILIES = ("random", "preempt", "shared", "long", "one_token", "priority", "no_chunking")


@dataclass(frozen=True)
class EngineKnobs:
    """The engine settings a scenario runs with (vLLM's names)."""

    block_size: int = 32
    num_blocks: int = 64  # with the null block
    max_model_len: int = 1024
    max_num_seqs: int = 8
    max_num_batched_tokens: int = 256
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = True
    policy: str = "fcfs"  # or "priority"
    long_prefill_token_threshold: int = 0
    reserve_full_isl: bool = True  # vLLM's scheduler_reserve_full_isl
    async_scheduling: bool = False


@dataclass(frozen=True)
class ScenarioRequest:
    prompt: tuple[int, ...]
    output: int  # output tokens (min_tokens = max_tokens, EOS ignored)
    step: int = 0
    priority: int = 0


@dataclass(frozen=True)
class Scenario:
    name: str
    family: str
    engine: EngineKnobs
    requests: tuple[ScenarioRequest, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["requests"] = [
            {"prompt": list(r.prompt), "output": r.output, "step": r.step, "priority": r.priority}
            for r in self.requests
        ]
        return data

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Scenario:
        knobs = {f.name for f in fields(EngineKnobs)}
        engine = data["engine"]
        if not isinstance(engine, dict) or set(engine) - knobs:
            raise ValueError(f"scenario {data.get('name')}: unknown engine knobs")
        requests = data["requests"]
        if not isinstance(requests, list):
            raise ValueError(f"scenario {data.get('name')}: requests must be a list")
        return cls(
            str(data["name"]),
            str(data["family"]),
            EngineKnobs(**engine),
            tuple(
                ScenarioRequest(tuple(r["prompt"]), r["output"], r["step"], r["priority"])
                for r in requests
            ),
        )


def write_jsonl_gz(path: Path, records: Iterable[dict[str, object]]) -> None:
    """One JSON object per line, gzip-compressed with a fixed timestamp (reproducible bytes)."""
    with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
        for record in records:
            out.write(json.dumps(record, separators=(",", ":")).encode() + b"\n")


def read_jsonl_gz(path: Path) -> Iterator[dict[str, object]]:
    with gzip.open(path, "rt") as lines:
        for line in lines:
            yield json.loads(line)


# -- the random generator ---------------------------------------------------------------------
def _prompt(rng: random.Random, length: int) -> tuple[int, ...]:
    return tuple(rng.randrange(3, VOCAB) for _ in range(length))


def _blocks(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def random_scenario(
    seed: int, family: str | None = None, *, async_scheduling: bool = False
) -> Scenario:
    """Scenario ``seed`` (the same seed gives the same scenario); its family cycles through
    :data:`FAMILIES` unless given. With ``async_scheduling`` the same scenario runs with vLLM's
    async scheduling (its name ends in ``a``)."""
    rng = random.Random(seed)
    family = FAMILIES[seed % len(FAMILIES)] if family is None else family
    bs = rng.choice((32, 32, 64))
    max_model_len = rng.choice((512, 1024))
    chunked = family != "no_chunking" and rng.random() < 0.9
    budget = rng.choice((64, 128, 256, 512)) if chunked else max_model_len + rng.choice((0, 256))
    max_seqs = rng.choice((2, 4, 8, 16))
    n = rng.randint(2, 14)
    out_max = 1 if family == "one_token" else rng.choice((8, 32, 96))
    requests = []
    bases = [_prompt(rng, rng.randint(bs, 3 * bs)) for _ in range(rng.randint(1, 3))]
    step = 0
    # a small pool and long outputs: decodes outgrow it (half the priority ones too)
    preempt = family == "preempt" or (family == "priority" and rng.random() < 0.5)
    if preempt:
        max_model_len, n, out_max = 256, rng.randint(5, 14), rng.choice((64, 128))
        max_seqs = rng.choice((4, 8, 16))
    for _ in range(n):
        output = rng.randint(out_max // 2 if preempt else 1, out_max)
        room = max_model_len - output
        if family == "long" and rng.random() < 0.6:
            length = rng.randint(min(budget, room), room)
        else:
            length = rng.randint(1, min(room, rng.choice((24, 80, 300))))
        if family in ("shared", "preempt") and rng.random() < 0.6:
            base = rng.choice(bases)
            duplicate = rng.random() < 0.25
            prompt = base if duplicate else base + _prompt(rng, rng.randint(1, 2 * bs))
            prompt = prompt[:room]
        else:
            prompt = _prompt(rng, length)
        if rng.random() < (0.2 if preempt else 0.5):
            step += rng.choice((0, 0, 1, 3, 10))
        priority = rng.randint(0, 3) if family == "priority" else 0
        requests.append(ScenarioRequest(prompt, output, step, priority))
    # vLLM refuses to start with a pool smaller than max_model_len (and so does simkv)
    least = max(
        _blocks(max_model_len, bs), *(_blocks(len(r.prompt) + r.output, bs) for r in requests)
    )
    num_blocks = 1 + least + (rng.randint(0, 3) if preempt else rng.randint(0, 40))
    threshold = rng.choice((0, 0, 0, 48)) if chunked else 0
    engine = EngineKnobs(
        block_size=bs,
        num_blocks=num_blocks,
        max_model_len=max_model_len,
        max_num_seqs=max_seqs,
        max_num_batched_tokens=max(budget, max_seqs),
        enable_chunked_prefill=chunked,
        enable_prefix_caching=rng.random() < 0.85,
        policy="priority" if family == "priority" else "fcfs",
        long_prefill_token_threshold=threshold,
        reserve_full_isl=rng.random() < 0.8,
    )
    if async_scheduling:
        engine = replace(engine, async_scheduling=True)
    name = f"s{seed:05d}{'a' if async_scheduling else ''}"
    return Scenario(name, family, engine, tuple(requests))
