"""The live runs' requests: Poisson arrivals, random token-id prompts, lengths by mix.

Standard library only: ``live.py`` imports it inside vLLM's virtualenv, the tests inside simkv's.
"""

from __future__ import annotations

import random

VOCAB = 32_000  # token ids are drawn below the models' vocabulary (tiny-llama/config.json)
MIXES: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    "chat": ((32, 512), (16, 128)),
    "long": ((256, 1024), (8, 64)),
    "decode": ((16, 128), (64, 256)),
}
"""Per length mix, the (prompt, output) token ranges lengths are drawn from, uniformly."""

Request = tuple[float, list[int], int]
"""(arrival s from the run's start, prompt token ids, output tokens)."""


def plan(rate: float, count: int, mix: str, seed: int) -> list[Request]:
    """``count`` requests of length mix ``mix``, Poisson at ``rate`` req/s from t = 0.

    One seeded stream draws each request's prompt, output and the gap to the next in turn; a
    gap takes one draw at any rate, so the same ``(count, mix, seed)`` gives the same prompts
    and outputs at every rate (only the gaps scale) and a sweep's runs differ in load alone."""
    if rate <= 0 or count < 1 or mix not in MIXES:
        raise ValueError(f"need rate > 0, count ≥ 1 and a mix of {sorted(MIXES)}")
    rng = random.Random(seed)
    (p_lo, p_hi), (o_lo, o_hi) = MIXES[mix]
    out, clock = [], 0.0
    for _ in range(count):
        prompt = [rng.randrange(100, VOCAB) for _ in range(rng.randint(p_lo, p_hi))]
        out.append((clock, prompt, rng.randint(o_lo, o_hi)))
        clock += rng.expovariate(rate)
    return out
