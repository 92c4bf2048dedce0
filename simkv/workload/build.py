"""Turn a validated workload config into a :class:`Workload`.

Random draws happen in a fixed order — arrivals, then the kind's own order (synthetic: prompt
lengths, output lengths, priorities; shared_prefix and multi_turn: see
:mod:`simkv.workload.generators`; agentic: :mod:`simkv.workload.agentic`) — so the same config
and seed always give identical arrays.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simkv.config.distributions import (
    ArrivalConfig,
    ConstantArrival,
    EmpiricalLength,
    ExponentialThink,
    FixedLength,
    FixedThink,
    GammaArrival,
    LengthConfig,
    LognormalLength,
    NormalLength,
    PriorityConfig,
    ThinkTimeConfig,
    UniformLength,
    UniformThink,
    ZipfLength,
)
from simkv.config.limits import MAX_ARRIVAL_S
from simkv.config.workload import (
    AgenticWorkload,
    BeamSampling,
    MeasuredWorkload,
    MultiTurnWorkload,
    SamplingConfig,
    SharedPrefixWorkload,
    SyntheticWorkload,
    TraceWorkload,
    WorkloadConfig,
)
from simkv.errors import InputError
from simkv.measured import read_measured_run
from simkv.workload import agentic, arrivals, generators, lengths
from simkv.workload.generators import LengthSampler
from simkv.workload.replay import measured_workload
from simkv.workload.request import Workload
from simkv.workload.traces import ArrivalSampler, ColumnMap, read_trace


def _resolve(path: Path, base_dir: Path) -> Path:
    return path if path.is_absolute() else base_dir / path


def sample_arrivals(
    cfg: ArrivalConfig,
    rng: np.random.Generator,
    *,
    n: int | None = None,
    duration_s: float | None = None,
) -> np.ndarray:
    """Arrival times (s) of the configured process: ``n`` of them, or all before ``duration_s``."""
    rate: float | arrivals.RateSchedule
    if cfg.schedule is not None:
        rate = arrivals.RateSchedule.from_pairs(cfg.schedule)
    else:
        assert cfg.rate is not None  # the config validates "rate xor schedule"
        rate = cfg.rate
    if isinstance(cfg, GammaArrival):
        return arrivals.gamma(rng, rate, cv=cfg.cv, n=n, duration_s=duration_s)
    if isinstance(cfg, ConstantArrival):
        return arrivals.constant(rng, rate, n=n, duration_s=duration_s)
    return arrivals.poisson(rng, rate, n=n, duration_s=duration_s)


def sample_lengths(
    cfg: LengthConfig, rng: np.random.Generator, n: int, base_dir: Path
) -> np.ndarray:
    """``n`` lengths (int64 tokens ≥ 1) from the configured distribution."""
    clip = {"min_tokens": cfg.min, "max_tokens": cfg.max}
    match cfg:
        case FixedLength():
            return lengths.fixed(rng, n, cfg.value, **clip)
        case UniformLength():
            return lengths.uniform(rng, n, cfg.low, cfg.high, **clip)
        case NormalLength():
            return lengths.normal(rng, n, cfg.mean, cfg.std, **clip)
        case LognormalLength():
            if cfg.mu is not None and cfg.sigma is not None:
                mu, sigma = cfg.mu, cfg.sigma
            else:
                mu, sigma = lengths.lognormal_params(cfg.mean, cfg.median)  # type: ignore[arg-type]
            return lengths.lognormal(rng, n, mu, sigma, **clip)
        case ZipfLength():
            return lengths.zipf(rng, n, cfg.a, cfg.low, cfg.high, **clip)
        case EmpiricalLength():
            path = _resolve(cfg.path, base_dir)
            return lengths.empirical(rng, n, path, cfg.column, **clip)
    raise TypeError(f"unknown length config {type(cfg).__name__}")


def sample_priorities(cfg: PriorityConfig | None, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` priorities (int64); all 0 when ``cfg`` is None (and no random draw is made)."""
    if cfg is None:
        return np.zeros(n, np.int64)
    weights = None
    if cfg.weights is not None:
        weights = np.asarray(cfg.weights, dtype=np.float64)
        weights = weights / weights.sum()
    return rng.choice(np.asarray(cfg.values, dtype=np.int64), size=n, p=weights)


def sample_think_s(cfg: ThinkTimeConfig, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` think times (float64 s ≥ 0); a fixed value makes no random draw."""
    match cfg:
        case FixedThink():
            return np.full(n, cfg.value_s, np.float64)
        case ExponentialThink():
            return rng.exponential(cfg.mean_s, size=n)
        case UniformThink():
            return rng.uniform(cfg.low_s, cfg.high_s, size=n)
    raise TypeError(f"unknown think time config {type(cfg).__name__}")


def _arrivals(
    cfg: ArrivalConfig, rng: np.random.Generator, n: int | None, duration_s: float | None
) -> np.ndarray:
    """Arrival times; :class:`InputError` when none falls within ``duration_s``."""
    arrival_s = sample_arrivals(cfg, rng, n=n, duration_s=duration_s)
    if len(arrival_s) == 0:
        message = f"no request arrives within duration_s={duration_s}"
        raise InputError(message, field="workload.duration_s")
    return arrival_s


def _lengths(cfg: LengthConfig, rng: np.random.Generator, base_dir: Path) -> LengthSampler:
    return lambda n: sample_lengths(cfg, rng, n, base_dir)


def _shared_prefix(cfg: SharedPrefixWorkload, rng: np.random.Generator, base_dir: Path) -> Workload:
    arrival_s = _arrivals(cfg.arrival, rng, cfg.num_requests, cfg.duration_s)
    return generators.shared_prefix(
        rng,
        arrival_s,
        num_prefixes=cfg.num_prefixes,
        zipf_a=cfg.zipf_a,
        prefix_tokens=_lengths(cfg.prefix_tokens, rng, base_dir),
        suffix_tokens=_lengths(cfg.suffix_tokens, rng, base_dir),
        output_tokens=_lengths(cfg.output_tokens, rng, base_dir),
        source=f"shared_prefix: {len(arrival_s)} requests, {cfg.num_prefixes} prefixes, "
        f"{cfg.arrival.kind} arrivals",
    )


def _multi_turn(cfg: MultiTurnWorkload, rng: np.random.Generator, base_dir: Path) -> Workload:
    arrival_s = _arrivals(cfg.arrival, rng, cfg.num_sessions, cfg.duration_s)
    try:
        return _sessions(cfg, rng, base_dir, arrival_s)
    except generators.WorkloadTooLarge as err:
        raise InputError(str(err), field="workload.turns") from None


def _sessions(
    cfg: MultiTurnWorkload, rng: np.random.Generator, base_dir: Path, arrival_s: np.ndarray
) -> Workload:
    return generators.multi_turn(
        arrival_s,
        turns=_lengths(cfg.turns, rng, base_dir),
        first_prompt_tokens=_lengths(cfg.first_prompt_tokens, rng, base_dir),
        new_tokens=_lengths(cfg.new_tokens, rng, base_dir),
        output_tokens=_lengths(cfg.output_tokens, rng, base_dir),
        think_s=lambda n: sample_think_s(cfg.think_s, rng, n),
        max_prompt_tokens=cfg.max_prompt_tokens,
        source=f"multi_turn: {len(arrival_s)} sessions, {cfg.arrival.kind} arrivals",
    )


def _agentic(cfg: AgenticWorkload, rng: np.random.Generator, base_dir: Path) -> Workload:
    arrival_s = _arrivals(cfg.arrival, rng, cfg.num_sessions, cfg.duration_s)
    fanout = None
    if cfg.fanout is not None:
        fan = cfg.fanout

        def fans(k: np.ndarray) -> np.ndarray:
            drawn = rng.random(len(k)) < fan.probability
            return drawn if fan.every is None else drawn | (k % fan.every == 0)

        fanout = agentic.Fanout(
            fans,
            _lengths(fan.children, rng, base_dir),
            _lengths(fan.child_tokens, rng, base_dir),
            _lengths(fan.child_output_tokens, rng, base_dir),
        )
    try:
        return agentic.agentic(
            arrival_s,
            calls=_lengths(cfg.calls, rng, base_dir),
            system_prompt_tokens=cfg.system_prompt_tokens,
            task_tokens=_lengths(cfg.task_tokens, rng, base_dir),
            output_tokens=_lengths(cfg.output_tokens, rng, base_dir),
            tool_s=lambda n: sample_think_s(cfg.tool_s, rng, n),
            tool_output_tokens=_lengths(cfg.tool_output_tokens, rng, base_dir),
            fanout=fanout,
            max_prompt_tokens=cfg.max_prompt_tokens,
            pin_ttl_s=cfg.pin_ttl_s,
            source=f"agentic: {len(arrival_s)} sessions, {cfg.arrival.kind} arrivals",
        )
    except generators.WorkloadTooLarge as err:
        raise InputError(str(err), field="workload.calls") from None


def _synthetic(cfg: SyntheticWorkload, rng: np.random.Generator, base_dir: Path) -> Workload:
    arrival_s = _arrivals(cfg.arrival, rng, cfg.num_requests, cfg.duration_s)
    n = len(arrival_s)
    return Workload(
        arrival_s,
        sample_lengths(cfg.prompt_tokens, rng, n, base_dir),
        sample_lengths(cfg.output_tokens, rng, n, base_dir),
        sample_priorities(cfg.priority, rng, n),
        f"synthetic: {n} requests, {cfg.arrival.kind} arrivals",
    )


def _trace(cfg: TraceWorkload, rng: np.random.Generator, base_dir: Path) -> Workload:
    sampler: ArrivalSampler | None = None
    if cfg.arrival is not None:
        arrival_cfg = cfg.arrival

        def sampler(n: int) -> np.ndarray:
            return sample_arrivals(arrival_cfg, rng, n=n)

    columns = None
    if cfg.columns is not None:
        columns = ColumnMap(**cfg.columns.model_dump())
    return read_trace(
        _resolve(cfg.path, base_dir),
        format=cfg.format,
        columns=columns,
        arrival=sampler,
        time_scale=cfg.time_scale,
        rate=cfg.rate,
        limit=cfg.limit,
        start_s=cfg.start_s,
        end_s=cfg.end_s,
    )


def _measured(cfg: MeasuredWorkload, base_dir: Path) -> Workload:
    run = read_measured_run(_resolve(cfg.path, base_dir))
    return measured_workload(run, limit=cfg.limit, content=cfg.content)


def apply_sampling(workload: Workload, cfg: SamplingConfig | None) -> Workload:
    """``workload`` with the sampling columns of ``cfg`` (unchanged when ``cfg`` is None)."""
    if cfg is None:
        return workload
    if isinstance(cfg, BeamSampling):
        return workload.with_sampling(cfg.width, 0, True)
    return workload.with_sampling(cfg.n, cfg.fork_after_tokens, False)


def build_workload(cfg: WorkloadConfig, rng: np.random.Generator, base_dir: Path) -> Workload:
    """The workload described by ``cfg``; relative paths are resolved against ``base_dir``.

    Raises :class:`simkv.errors.InputError` for unreadable or bad trace, empirical or
    measurement files and for a generated workload's duration in which no request (session)
    arrives. ``sampling`` (synthetic and trace kinds) only sets the workload's sampling columns:
    no random draw.
    """
    match cfg:
        case TraceWorkload():
            workload = apply_sampling(_trace(cfg, rng, base_dir), cfg.sampling)
        case SharedPrefixWorkload():
            workload = _shared_prefix(cfg, rng, base_dir)
        case MultiTurnWorkload():
            workload = _multi_turn(cfg, rng, base_dir)
        case AgenticWorkload():
            workload = _agentic(cfg, rng, base_dir)
        case MeasuredWorkload():
            workload = _measured(cfg, base_dir)
        case _:
            workload = apply_sampling(_synthetic(cfg, rng, base_dir), cfg.sampling)
    _check_horizon(workload, cfg)
    return workload


def _check_horizon(workload: Workload, cfg: WorkloadConfig) -> None:
    """Every arrival at most :data:`~simkv.config.limits.MAX_ARRIVAL_S`; else an
    :class:`InputError` at the key that placed it (arrival process, rate, time_scale, path)."""
    last = float(workload.arrival_s.max(initial=0.0))
    if last <= MAX_ARRIVAL_S:
        return
    if getattr(cfg, "arrival", None) is not None:
        key = "arrival"
    elif isinstance(cfg, TraceWorkload):
        key = "rate" if cfg.rate is not None else "time_scale"
    else:
        key = "path"
    raise InputError(
        f"a request arrives at {last:.3g} s, later than {MAX_ARRIVAL_S:.0e} s "
        "(simkv.config.limits.MAX_ARRIVAL_S)",
        field=f"workload.{key}",
    )
