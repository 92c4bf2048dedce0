"""Run the public splitwise-sim on simkv's comparison setting and summarise its results.

Not run by tests or CI: it needs a splitwise-sim checkout (github.com/Mutinifni/splitwise-sim,
MIT licence) and a Python environment with its requirements (hydra-core 1.3.2, omegaconf,
pandas, numpy, scipy, networkx). This script itself needs only pandas; it drives splitwise-sim
through ``subprocess`` (one ``run.py`` per configuration and rate, single process, hydra's basic
launcher) and never imports it. See ``benchmarks/data/splitwise_sim_README.md`` for provenance
and splitwise-sim's semantics.

Setting (fixed): Llama-2-70B (``llama2-70b`` / ``llama2-70b-fp16``), one TP-8 instance per
DGX server, ``performance_model=db`` (``data/perf_model.csv``), seed 0; the first ``--rows`` rows
of the Azure 2023 conversation trace at its own arrival times (rate ``x1``) and with arrivals
divided by 4 (rate ``x4``). Configurations on 4 DGX-A100: the colocated ``baseline`` start state
with the ``token_jsq`` scheduler (as ``scripts/run_baseline_a.sh``), and the homogeneous
``splitwise`` start state with prompt:token machines 1:3, 2:2, 3:1 under ``mixed_pool`` (the
scheduler of ``scripts/run_splitwise_aa.sh`` and ``run_isocost.sh``) and, as pure-split
references, ``kv_jsq`` (no overlap) and ``overlap_kv_jsq`` (its "overlap": 10x bandwidth).
Then splitwise-sim's isocost clusters scaled to a budget of 4 DGX-H100 (see
``isocost_configurations``): baselines on 4 H100 and 8 A100, splits 2:2 on 4 H100, 4:4 on 8 A100,
and Splitwise-HA (2 H100 prompt + 4 A100 token machines, heterogeneous split), each split under
``kv_jsq`` and ``mixed_pool``. Columns ``prompt_sku``/``token_sku`` name the machines' SKU.

Trace conversion: ``arrival_timestamp`` = TIMESTAMP minus the first TIMESTAMP in seconds, divided
by the rate factor, **plus 1 s**: splitwise-sim's ``Simulator.schedule`` runs a zero-delay event
at once, and ``run.py`` loads the trace before the start state, so a request at t=0 fails with
"No instances available". The shift is common to all requests and changes no latency.

Metrics, per (configuration, rate), from the run directory's ``detailed/0.csv`` (written by
``Scheduler.get_results``; one row per finished request; times in seconds, reported in ms):
- ``ttft_*_ms``: column ``ttft_times`` = PromptTask completion - router arrival (first token is
  produced by the prompt iteration; the KV transfer is not included).
- ``e2e_*_ms``: column ``response_times`` = request completion at router - router arrival.
- ``tbt_*_ms``: per-request mean time between tokens = (response_times - ttft_times) /
  (token_sizes - 1). ``tbt_sws_*_ms``: splitwise-sim's own ``tbt_times`` column, which divides by
  ``token_sizes`` instead (so it is (n-1)/n of ``tbt``).
- percentiles: ``numpy.percentile`` default (linear), as splitwise-sim's ``utils.get_statistics``.
- ``span_s``: last completion (arrival + response_times, max) minus first arrival, i.e. the
  makespan of the trace; ``throughput_rps`` = finished / span_s; ``throughput_out_tok_s`` = sum of
  ``token_sizes`` over finished requests / span_s.
- ``kv_transfers``, ``kv_transfer_mean_ms``: rows of ``request_nodes.csv`` with node_type
  ``KVCacheTransfer`` (count, mean of completion - start); requests without one ran prompt and
  decode on the same instance (always in the baseline; under ``mixed_pool`` when it borrowed
  an instance into its mixed pool).

Usage::

    python tools/splitwise_sim_reference.py --sws-src /tmp/sws/src \
        --sws-python /tmp/sws/venv/bin/python
"""

from __future__ import annotations

import argparse
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = REPO / "traces" / "azure2023" / "AzureLLMInferenceTrace_conv.csv"
DEFAULT_OUT = REPO / "benchmarks" / "data" / "splitwise_sim_results.csv"
MACHINES = 4  # the original comparison: 4 DGX-A100
A100, H100 = "dgx-a100", "dgx-h100"  # cluster.servers.0 / .1 of cluster=half_half
RATES: dict[str, float] = {"x1": 1.0, "x4": 4.0}
ARRIVAL_SHIFT_S = 1.0
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Config:
    """One splitwise-sim cluster configuration (one TP-8 instance per DGX server).

    ``prompt_machines == token_machines == 0`` means the colocated baseline: every machine
    runs one mixed (prompt and decode) instance. ``heterogeneous`` means splitwise's
    heterogeneous split: every ``prompt_sku`` server is a prompt machine and every
    ``token_sku`` server a token machine (``start_state.split_type=heterogeneous``).
    """

    name: str
    prompt_machines: int
    token_machines: int
    scheduler: str
    a100: int = MACHINES
    h100: int = 0
    prompt_sku: str = A100
    token_sku: str = A100
    heterogeneous: bool = False

    def overrides(self) -> list[str]:
        """Hydra overrides selecting this configuration's cluster, start state and scheduler."""
        common = [
            f"applications.0.scheduler={self.scheduler}",
            "cluster=half_half",
            f"cluster.servers.0.count={self.a100}",
            f"cluster.servers.1.count={self.h100}",
        ]
        if self.prompt_machines == 0 and self.token_machines == 0:
            return [*common, "start_state=baseline"]
        split = [
            *common,
            "start_state=splitwise",
            f"start_state.split_type={'heterogeneous' if self.heterogeneous else 'homogeneous'}",
            f"start_state.prompt.num_instances={self.prompt_machines}",
            f"start_state.token.num_instances={self.token_machines}",
        ]
        if self.heterogeneous:
            split += [
                f"start_state.prompt.instance_names=[{self.prompt_sku}]",
                f"start_state.token.instance_names=[{self.token_sku}]",
            ]
        return split


def isocost_configurations() -> list[Config]:
    """splitwise-sim's isocost setting scaled to a budget of 4 DGX-H100.

    ``experiment/isocost_cluster.yaml`` buys ``int(4.76 * (40 - h) // 2.21)`` DGX-A100 for the
    budget of 40 - h DGX-H100: 8 for 4 H100 (86/40 = 2.15 A100 per H100), and 4 for the
    budget of 2 H100 in Splitwise-HA (``experiment/splitwise_ha_isocost.yaml``): 2 H100 prompt
    machines + 4 A100 token machines.
    """
    h, a = dict(a100=0, h100=4), dict(a100=8, h100=0)
    configs = [
        Config("baseline_h100_4", 0, 0, "token_jsq", **h, prompt_sku=H100, token_sku=H100),
        Config("baseline_a100_8", 0, 0, "token_jsq", **a),
    ]
    for scheduler in ("kv_jsq", "mixed_pool"):
        configs += [
            Config(
                f"splitwise_hh_2p2t_{scheduler}",
                2,
                2,
                scheduler,
                **h,
                prompt_sku=H100,
                token_sku=H100,
            ),
            Config(f"splitwise_aa_4p4t_{scheduler}", 4, 4, scheduler, **a),
            Config(
                f"splitwise_ha_2p4t_{scheduler}",
                2,
                4,
                scheduler,
                a100=4,
                h100=2,
                prompt_sku=H100,
                heterogeneous=True,
            ),
        ]
    return configs


def configurations() -> list[Config]:
    """The 4-A100 baseline and three splits under each split scheduler, then the isocost set."""
    configs = [Config("baseline_4", 0, 0, "token_jsq")]
    for scheduler in ("mixed_pool", "kv_jsq", "overlap_kv_jsq"):
        for prompt in (1, 2, 3):
            name = f"splitwise_{prompt}p{MACHINES - prompt}t_{scheduler}"
            configs.append(Config(name, prompt, MACHINES - prompt, scheduler))
    return configs + isocost_configurations()


def write_traces(source: Path, rows: int, trace_dir: Path) -> dict[str, Path]:
    """Write one splitwise-sim trace CSV per rate; return rate label -> path."""
    raw = pd.read_csv(source, nrows=rows)
    stamps = pd.to_datetime(raw["TIMESTAMP"])
    arrival_s = (stamps - stamps.iloc[0]).dt.total_seconds()
    trace_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for label, factor in RATES.items():
        frame = pd.DataFrame(
            {
                "request_id": range(len(raw)),
                "request_type": 2,  # RequestType.GENERATIVE_LLM
                "application_id": 0,
                "arrival_timestamp": arrival_s / factor + ARRIVAL_SHIFT_S,
                "batch_size": 1,
                "prompt_size": raw["ContextTokens"],
                "token_size": raw["GeneratedTokens"],
            }
        )
        paths[label] = trace_dir / f"azconv{rows}_{label}.csv"
        frame.to_csv(paths[label], index=False)
    return paths


def write_basic_config(sws_src: Path, cfg_dir: Path) -> None:
    """Copy splitwise-sim's config.yaml without its ray launcher (fixed cluster address)."""
    text = (sws_src / "configs" / "config.yaml").read_text()
    text = text.replace("  - override hydra/launcher: ray\n", "")
    text = text[: text.index("  launcher:\n")]
    cfg_dir.mkdir(parents=True, exist_ok=True)
    (cfg_dir / "config_basic.yaml").write_text(text)


def run_one(args: argparse.Namespace, config: Config, trace: Path, run_dir: Path) -> None:
    """Run splitwise-sim once (blocking); its outputs land in ``run_dir``."""
    command = [
        str(args.sws_python),
        "run.py",
        "--config-dir",
        str(args.workdir / "cfg"),
        "--config-name",
        "config_basic",
        f"hydra.run.dir={run_dir}",
        "applications.0.model_architecture=llama2-70b",
        "applications.0.model_size=llama2-70b-fp16",
        "performance_model=db",
        f"trace.dir={trace.parent}",
        f"trace.filename={trace.stem}",
        "seed=0",
        *config.overrides(),
    ]
    done = subprocess.run(command, cwd=args.sws_src, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"splitwise-sim failed for {run_dir.name}:\n{done.stderr[-3000:]}")


def percentiles_ms(values: pd.Series, prefix: str) -> dict[str, float]:
    """p50/p90/p99 of a series in seconds, as ``{prefix}_pNN_ms`` in milliseconds."""
    return {f"{prefix}_p{q}_ms": float(values.quantile(q / 100) * 1000) for q in PERCENTILES}


def summarise(run_dir: Path, trace: Path) -> dict[str, float]:
    """Summary metrics of one run (see the module docstring for each definition)."""
    detail = pd.read_csv(run_dir / "detailed" / "0.csv")
    arrivals = pd.read_csv(trace).set_index("request_id")["arrival_timestamp"]
    arrival_s = arrivals.loc[detail["request_ids"].astype(int)].to_numpy()
    span_s = float((arrival_s + detail["response_times"]).max() - arrivals.min())
    decode_gaps = (detail["token_sizes"] - 1).clip(lower=1)
    tbt_s = (detail["response_times"] - detail["ttft_times"]) / decode_gaps
    nodes = pd.read_csv(run_dir / "request_nodes.csv")
    flows = nodes[nodes["node_type"] == "KVCacheTransfer"]
    flow_s = flows["completion_timestamp"] - flows["start_timestamp"]
    return {
        "requests_finished": len(detail),
        **percentiles_ms(detail["ttft_times"], "ttft"),
        **percentiles_ms(tbt_s, "tbt"),
        **percentiles_ms(detail["tbt_times"], "tbt_sws"),
        **percentiles_ms(detail["response_times"], "e2e"),
        "span_s": span_s,
        "throughput_rps": len(detail) / span_s,
        "throughput_out_tok_s": float(detail["token_sizes"].sum()) / span_s,
        "kv_transfers": len(flows),
        "kv_transfer_mean_ms": float(flow_s.mean() * 1000) if len(flows) else 0.0,
    }


def parse_args() -> argparse.Namespace:
    """Command-line arguments (paths to splitwise-sim and its Python)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sws-src", type=Path, required=True, help="splitwise-sim checkout")
    parser.add_argument("--sws-python", type=Path, required=True, help="its venv's python")
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/sws-reference"))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    return parser.parse_args()


def main() -> None:
    """Convert the trace, run every configuration x rate, write the tidy summary CSV."""
    args = parse_args()
    args.sws_src = args.sws_src.resolve()
    args.workdir = args.workdir.resolve()
    traces = write_traces(args.trace, args.rows, args.workdir / "traces")
    write_basic_config(args.sws_src, args.workdir / "cfg")
    rows = []
    for config in configurations():
        for label, trace in traces.items():
            run_dir = args.workdir / "out" / f"{config.name}_{label}"
            run_one(args, config, trace, run_dir)
            row = {
                "config": config.name,
                "prompt_machines": config.prompt_machines,
                "token_machines": config.token_machines,
                "mixed_machines": config.a100
                + config.h100
                - config.prompt_machines
                - config.token_machines,
                "scheduler": config.scheduler,
                "rate": label,
                **summarise(run_dir, trace),
                "prompt_sku": config.prompt_sku,
                "token_sku": config.token_sku,
            }
            print(f"{config.name} {label}: {row['requests_finished']} finished", flush=True)
            rows.append(row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).round(3).to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
