"""Physical ranges of config numbers: a value outside them is a config error, not an overflow.

The bounds are far above any real deployment and far below what breaks the arithmetic (int64
token counts, float64 bytes, numpy draws): a length or count of 10^30 or a lognormal ``mu`` of
800 would otherwise wrap, overflow or try to allocate terabytes. Every bound shows in
``simkv schema`` through the fields that use these types.
"""

from __future__ import annotations

import math
import re
from typing import Annotated

from pydantic import Field

MAX_TOKENS = 2**31
"""Longest length of anything in tokens (prompt, output, context, block)."""
MAX_REQUESTS = 10**7
"""Most requests (or sessions) a synthetic workload may generate: a count given, or expected
from ``duration_s`` × the arrival rate (a rate of 1e9/s for 1e9 s would be 10^18 requests), or
the turns a multi-turn workload draws. A million requests take about a minute and 1.3 GB
(docs/performance.md); ten times that is the most one run is meant for."""
MAX_GPU_GIB = 1024.0
"""Most memory one GPU could have (GiB); today's largest have under 300."""
MAX_SWAP_GIB = 16384.0
"""Most CPU swap space per GPU (GiB)."""
MAX_LOG_TOKENS = math.log(MAX_TOKENS)
"""Largest ``mu`` (mean of log length) of a lognormal length: e^mu ≤ MAX_TOKENS."""
MAX_LOG_SIGMA = 10.0
"""Largest ``sigma`` (std of log length) of a lognormal length."""
MAX_BLOCKS = 2**26
"""Most KV blocks per GPU (given or derived): the simulator keeps per-block tables."""
MAX_RUN_BLOCKS = 2**27
"""Most KV blocks one run allocates over all its replicas: Σ over replica groups of count ×
(GPU blocks + CPU swap blocks of a scheduler that swaps). Each block costs about 56 bytes of
tables and free lists (measured at block size 1: 10^6 blocks 190 MB, 8·10^6 blocks 595 MB), so
this is about 7.5 GB; a fleet of 4,096 replicas of block size 1 would otherwise fill memory
long after start-up. An 80 GB GPU with 16-token blocks holds about 30,000 blocks."""
MAX_MODEL_DIM = 2**20
"""Largest model dimension or count (layers, hidden and head sizes, heads, vocabulary, experts):
far above any model (today's largest are under 2^18), so a typo of 10^12 layers or a width of
10^23 is refused rather than simulated (or silently unused) as a model no GPU could hold."""
MAX_PARAMETERS = 10**15
"""Most parameters of a model (10^15; today's largest are under 2·10^12)."""
ModelDim = Annotated[int, Field(gt=0, le=MAX_MODEL_DIM, description=f"1..{MAX_MODEL_DIM}")]
"""A positive model dimension or count, at most :data:`MAX_MODEL_DIM`."""
ModelCount = Annotated[int, Field(ge=0, le=MAX_MODEL_DIM, description=f"0..{MAX_MODEL_DIM}")]
"""A model count that may be 0 (experts of a dense model), at most :data:`MAX_MODEL_DIM`."""
MAX_TP = 1024
"""Largest tensor-parallel degree."""
MIN_PRIORITY = -(2**31)
"""Smallest request priority (lower = more important)."""
MAX_PRIORITY = 2**31 - 1
"""Largest request priority. vLLM takes any Python int; simkv keeps priorities in int64
columns, so a trace's 1e30 would wrap. A 32-bit range is more classes than any scheduler uses."""
MAX_ARRIVAL_S = 1e9
"""Latest arrival time in seconds (about 31 years), of a trace row (after ``time_scale`` or
``rate``) or a generated request, and longest think time: at 10^9 s a float64 time still
resolves 10^-7 s, below any step time; beyond, steps would stop advancing the clock."""
MAX_WEIGHT = 1e12
"""Largest relative weight (of a priority value): weights are normalized by their sum, which
1e308 each would overflow to infinity."""
MIN_TFLOPS, MAX_TFLOPS = 1e-3, 1e5
"""Range of a GPU's TFLOP/s (1 GFLOP/s to 100 PFLOP/s; today's largest are under 5,000): a
rate of 1e-300 would price a step at infinity and write a summary JSON cannot hold."""
MIN_GBPS, MAX_GBPS = 1e-3, 1e6
"""Range of a bandwidth in GB/s (HBM, host link, interconnect: 1 MB/s to 1 PB/s)."""
MAX_OVERHEAD_MS = 1e6
"""Longest fixed time of a cost-model term in ms (1,000 s; real ones are under 1 ms)."""
MAX_LATENCY_US = 1e9
"""Longest latency of a cost-model term in µs (1,000 s)."""
MIN_EFFICIENCY = 1e-3
"""Smallest efficiency (fraction of a spec-sheet rate); the calibration never goes below 0.005."""
Tflops = Annotated[
    float,
    Field(ge=MIN_TFLOPS, le=MAX_TFLOPS, description=f"TFLOP/s, {MIN_TFLOPS:g}..{MAX_TFLOPS:g}"),
]
"""A compute rate in TFLOP/s within [:data:`MIN_TFLOPS`, :data:`MAX_TFLOPS`]."""
Gbps = Annotated[
    float, Field(ge=MIN_GBPS, le=MAX_GBPS, description=f"GB/s, {MIN_GBPS:g}..{MAX_GBPS:g}")
]
"""A bandwidth in GB/s within [:data:`MIN_GBPS`, :data:`MAX_GBPS`]."""
MIN_CLOCK_MHZ, MAX_CLOCK_MHZ = 1.0, 1e5
"""Range of a clock in MHz (1 MHz to 100 GHz; today's GPUs boost to under 3,000)."""
ClockMhz = Annotated[
    float,
    Field(ge=MIN_CLOCK_MHZ, le=MAX_CLOCK_MHZ,
          description=f"MHz, {MIN_CLOCK_MHZ:g}..{MAX_CLOCK_MHZ:g}"),
]  # fmt: skip
"""A clock frequency in MHz within [:data:`MIN_CLOCK_MHZ`, :data:`MAX_CLOCK_MHZ`]."""
OverheadMs = Annotated[float, Field(ge=0, le=MAX_OVERHEAD_MS)]
"""A cost-model time in ms within [0, :data:`MAX_OVERHEAD_MS`]."""
LatencyUs = Annotated[float, Field(ge=0, le=MAX_LATENCY_US)]
"""A cost-model latency in µs within [0, :data:`MAX_LATENCY_US`]."""
MAX_SEGMENTS = 10**8
"""Most prompt-content segments a generated workload may hold (8 bytes each, about 1 GB with
their lengths): a multi-turn session of k turns holds k² of them, so long sessions outgrow
memory long before their request count does."""

Tokens = Annotated[int, Field(ge=1, le=MAX_TOKENS, description=f"tokens, 1..{MAX_TOKENS}")]
"""A positive length in tokens, at most :data:`MAX_TOKENS`."""
TokensFloat = Annotated[float, Field(gt=0, le=MAX_TOKENS)]
"""A positive (mean or median) length in tokens, at most :data:`MAX_TOKENS`."""
Seconds = Annotated[float, Field(ge=0, le=MAX_ARRIVAL_S, description="s, 0..1e9")]
"""A time span in seconds in [0, :data:`MAX_ARRIVAL_S`]."""
RequestCount = Annotated[int, Field(ge=1, le=MAX_REQUESTS)]
"""A number of requests or sessions, at most :data:`MAX_REQUESTS`."""
Priority = Annotated[
    int,
    Field(ge=MIN_PRIORITY, le=MAX_PRIORITY, description=f"{MIN_PRIORITY}..{MAX_PRIORITY}"),
]
"""A request priority in [:data:`MIN_PRIORITY`, :data:`MAX_PRIORITY`]."""
MAX_NAME_CHARS = 100
"""Longest run or sweep name (it is a folder name under reports/)."""
FolderName = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z0-9_\-][A-Za-z0-9_.\-]*$",
        max_length=MAX_NAME_CHARS,
        description="a folder name under reports/: letters, digits, _ - . (not first), "
        f"at most {MAX_NAME_CHARS} characters",
    ),
]
"""A run or sweep name: one folder under ``reports/``, never ``..`` or a hidden folder."""


def as_folder_name(text: str) -> str:
    """``text`` made a :data:`FolderName`: every character other than letters, digits, ``_``,
    ``-`` and ``.`` replaced by ``_``, a leading dot too, cut to :data:`MAX_NAME_CHARS`
    (a run named after a file ``my run.json`` is ``my_run.json``)."""
    name = re.sub(r"[^A-Za-z0-9_.\-]", "_", text)[:MAX_NAME_CHARS]
    return "_" + name[1:] if name.startswith(".") or not name else name
