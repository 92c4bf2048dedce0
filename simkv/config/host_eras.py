"""Host costs by engine era: the roofline's host-side defaults for each generation of vLLM.

The host side of a step (scheduling, input preparation, sampling, output processing, handing the
tensor-parallel workers their step) is a property of the serving engine's code and the CPU, not
of the GPU, and it changed by an order of magnitude across vLLM's generations. ``cost_model:
{kind: roofline, host_era: ...}`` picks a set of host defaults (:data:`HOST_ERAS`); a host field
the config sets itself wins over its era's value. ``host_era: auto`` (the default) follows the
scheduler (:func:`auto_era`) and the resolved config states the era and every value
(:func:`with_host_era`, called by :class:`simkv.config.sim.SimConfig`).

Each era cites the measurement its numbers come from (docs/cost-model.md, "Host costs by engine
era", shows the arithmetic). A host term with no measurement behind it is 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeVar

from pydantic import BaseModel

Config = TypeVar("Config", bound=BaseModel)

__all__ = ["HOST_ERAS", "HOST_FIELDS", "HostEra", "HostEraDefaults", "auto_era", "era_defaults",
           "with_host_era"]  # fmt: skip

HostEra = Literal["auto", "vllm-0.2-0.4", "vllm-0.6", "vllm-v1"]
"""An engine era of :data:`HOST_ERAS`, or ``auto`` (the scheduler's: :func:`auto_era`)."""

HOST_FIELDS = (
    "step_overhead_ms",
    "seq_overhead_ms",
    "worker_overhead_ms",
    "prefill_overhead_ms",
    "output_token_overhead_ms",
    "queued_request_overhead_ms",
)
"""The host terms of :class:`~simkv.config.cost.RooflineCostConfig`, in ms; no GPU term is
among them, and no host term depends on the GPU (:meth:`RooflineCostModel.host_s`)."""


@dataclass(frozen=True)
class HostEraDefaults:
    """One era's host terms (ms, :data:`HOST_FIELDS` order) and the measurement behind them."""

    step_overhead_ms: float
    seq_overhead_ms: float
    worker_overhead_ms: float
    prefill_overhead_ms: float
    output_token_overhead_ms: float
    queued_request_overhead_ms: float
    source: str

    def values(self) -> dict[str, float]:
        """The host terms by field name."""
        return {name: getattr(self, name) for name in HOST_FIELDS}


HOST_ERAS: dict[str, HostEraDefaults] = {
    "vllm-v1": HostEraDefaults(
        0.52, 0.0056, 0.0, 0.0, 0.0, 0.0,
        source="vLLM 0.19 (V1 engine): joint fit of step_overhead_ms and seq_overhead_ms to "
        "the two Llama-3.1-8B runs under traces/measured/llmservingsim-vllm0.19 (RTX 4090, "
        "RTX PRO 6000; 0.524 ms, 0.00560 ms; command in RooflineCostConfig's docstring); the "
        "other terms are not identifiable in those tp-1 runs",
    ),
    "vllm-0.6": HostEraDefaults(
        3.8, 0.0, 0.0, 0.0, 0.0, 0.0,
        source="vLLM blog 2024-09-05 'vLLM v0.6.0: 2.7x Throughput Improvement' "
        "(Llama 3 8B, one H100, profile of v0.5.3): scheduling, input preparation and "
        "gathering outputs take 29 % of the time, the GPU 38 %, the HTTP server 33 %, at "
        "'1 token every 13 ms under light load': 0.29 x 13 ms = 3.8 ms a step (the GPU share, "
        "0.38 x 13 = 4.9 ms, is the 16 GB weight stream at 3.35 TB/s); v0.6 moved the HTTP "
        "server to its own process (PR #6883), so its 33 % is not counted; an upper bound, as "
        "v0.6's async output processing (PR #7049) hides part of the 29 %. The post splits "
        "no per-sequence term out",
    ),
    "vllm-0.2-0.4": HostEraDefaults(
        8.0, 0.020, 2.0, 1.47, 0.0, 0.0,
        source="vLLM of 2023-24 on A100-80GB: simkv calibrate "
        "traces/measured/distserve/profiler-a100-80g.vllm.json --gpu a100-80gb --model "
        "opt-13b (DistServe's OPT-13B step profile, TP 1, 2, 4; mean abs. error 53.4 % -> "
        "6.0 %): step 8.005 ms, per sequence 0.0199 ms, per TP worker beyond the first "
        "1.998 ms (that vLLM made one Ray call per worker per step), per prefilling sequence "
        "1.474 ms; fitted jointly with the GPU efficiencies, which the era does not set",
    ),
}  # fmt: skip
"""Engine era → host terms and their source. ``vllm-v1``'s are the field defaults of
:class:`~simkv.config.cost.RooflineCostConfig` (what a config without an era has always
used)."""


def auto_era(scheduler: object) -> str:
    """The era ``host_era: auto`` means under ``scheduler`` (a scheduler config):
    ``vllm-0.2-0.4`` or ``vllm-0.6`` for a ``vllm_v0`` scheduler whose ``vllm_version`` is
    "0.4" or "0.6", else ``vllm-v1`` (the V1 fit, which every config without a version has
    always used: a ``vllm_v0`` config names its version to get its era's host costs)."""
    if getattr(scheduler, "kind", None) != "vllm_v0":
        return "vllm-v1"
    version = getattr(scheduler, "vllm_version", None)
    return {"0.4": "vllm-0.2-0.4", "0.6": "vllm-0.6"}.get(str(version), "vllm-v1")


def era_defaults(data: object) -> object:
    """A raw ``cost_model`` section with an explicit era (not ``auto``) given the era's value
    for each host field it leaves out (the values then count as set); anything else as it
    is (an unknown era is refused by the field's validation)."""
    if not isinstance(data, dict):
        return data
    era = HOST_ERAS.get(str(data.get("host_era")))
    if era is None:
        return data
    return {**era.values(), **data}


def with_host_era(cfg: Config, era: str) -> Config:
    """``cfg`` (a :class:`~simkv.config.cost.RooflineCostConfig`) with ``host_era`` set to
    ``era`` (not ``auto``) and each host field it does not set itself (``model_fields_set``)
    at the era's value; ``cfg`` itself when it sets every host field (a calibration profile:
    no era supplies anything). Idempotent."""
    defaults = HOST_ERAS[era].values()
    update: dict[str, object] = {
        name: value for name, value in defaults.items() if name not in cfg.model_fields_set
    }
    if not update:
        return cfg
    update["host_era"] = era
    return cfg.model_copy(update=update)
