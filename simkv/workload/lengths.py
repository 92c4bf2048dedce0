"""Synthetic token-length distributions for prompts and outputs.

Every sampler returns ``n`` int64 values ≥ 1: continuous draws are rounded to the nearest
integer, then clipped to ``[max(1, min_tokens), max_tokens]`` (``None`` = no bound on that side).
Samplers are deterministic for a given ``numpy.random.Generator`` and its state.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from simkv.workload.traces import read_column

#: Largest support (high - low + 1) a bounded Zipf may have: its CDF is materialised.
MAX_ZIPF_SUPPORT = 10_000_000


def clip_tokens(
    values: np.ndarray, *, min_tokens: int | None = None, max_tokens: int | None = None
) -> np.ndarray:
    """Round to int64 and clip to ``[max(1, min_tokens), max_tokens]``."""
    low = max(1, min_tokens or 1)
    if max_tokens is not None and max_tokens < low:
        raise ValueError(f"max_tokens {max_tokens} is below the lower bound {low}")
    rounded = np.rint(values) if np.issubdtype(values.dtype, np.floating) else values
    return np.clip(rounded, low, max_tokens).astype(np.int64)


def fixed(
    rng: np.random.Generator,
    n: int,
    value: int,
    *,
    min_tokens: int | None = None,
    max_tokens: int | None = None,
) -> np.ndarray:
    """``value`` for every request (``rng`` unused, accepted for a uniform signature)."""
    return clip_tokens(np.full(n, value, np.int64), min_tokens=min_tokens, max_tokens=max_tokens)


def uniform(
    rng: np.random.Generator,
    n: int,
    low: int,
    high: int,
    *,
    min_tokens: int | None = None,
    max_tokens: int | None = None,
) -> np.ndarray:
    """Integers uniform on ``[low, high]``, both ends included."""
    if high < low:
        raise ValueError(f"uniform needs low ≤ high, got {low} > {high}")
    draws = rng.integers(low, high, size=n, endpoint=True, dtype=np.int64)
    return clip_tokens(draws, min_tokens=min_tokens, max_tokens=max_tokens)


def normal(
    rng: np.random.Generator,
    n: int,
    mean: float,
    std: float,
    *,
    min_tokens: int | None = None,
    max_tokens: int | None = None,
) -> np.ndarray:
    """Rounded normal draws (the clip at ≥ 1 truncates the left tail)."""
    if std < 0:
        raise ValueError(f"normal std must be ≥ 0, got {std}")
    draws = rng.normal(mean, std, size=n)
    return clip_tokens(draws, min_tokens=min_tokens, max_tokens=max_tokens)


def lognormal_params(mean: float, median: float) -> tuple[float, float]:
    """(mu, sigma) of the lognormal with this mean and median; needs mean ≥ median > 0.

    median = exp(mu) and mean = exp(mu + sigma²/2).
    """
    if not median > 0 or mean < median:
        raise ValueError(f"lognormal needs mean ≥ median > 0, got mean {mean}, median {median}")
    return math.log(median), math.sqrt(2.0 * math.log(mean / median))


def lognormal(
    rng: np.random.Generator,
    n: int,
    mu: float,
    sigma: float,
    *,
    min_tokens: int | None = None,
    max_tokens: int | None = None,
) -> np.ndarray:
    """Rounded exp(Normal(mu, sigma)) draws; see :func:`lognormal_params` for (mean, median)."""
    if sigma < 0:
        raise ValueError(f"lognormal sigma must be ≥ 0, got {sigma}")
    draws = rng.lognormal(mu, sigma, size=n)
    return clip_tokens(draws, min_tokens=min_tokens, max_tokens=max_tokens)


def zipf(
    rng: np.random.Generator,
    n: int,
    a: float,
    low: int,
    high: int,
    *,
    min_tokens: int | None = None,
    max_tokens: int | None = None,
) -> np.ndarray:
    """Bounded Zipf: P(k) ∝ k^(-a) for integers ``low ≤ k ≤ high`` (any ``a`` > 0, low ≥ 1)."""
    if not a > 0 or low < 1 or high < low:
        raise ValueError(f"zipf needs a > 0 and 1 ≤ low ≤ high, got a={a}, [{low}, {high}]")
    if high - low + 1 > MAX_ZIPF_SUPPORT:
        raise ValueError(f"zipf support [{low}, {high}] exceeds {MAX_ZIPF_SUPPORT} values")
    support = np.arange(low, high + 1, dtype=np.int64)
    cdf = np.cumsum(support.astype(np.float64) ** -a)
    index = np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right")
    draws = support[np.minimum(index, len(support) - 1)]
    return clip_tokens(draws, min_tokens=min_tokens, max_tokens=max_tokens)


def empirical(
    rng: np.random.Generator,
    n: int,
    path: Path,
    column: str,
    *,
    min_tokens: int | None = None,
    max_tokens: int | None = None,
) -> np.ndarray:
    """Draw with replacement from ``column`` of a CSV/JSONL file (values must be ints ≥ 1).

    Raises :class:`simkv.errors.InputError` for an unreadable file or bad values.
    """
    pool = read_column(path, column)
    draws = pool[rng.integers(0, len(pool), size=n)]
    return clip_tokens(draws, min_tokens=min_tokens, max_tokens=max_tokens)
