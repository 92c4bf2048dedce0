"""simkv against a real vLLM's step logs: generate scenarios, compare, report.

    python -m tools.vllm_reference.conformance generate 1000:1400 scenarios.jsonl.gz \
        [--async-seeds 1000:1300]
    python -m tools.vllm_reference.conformance compare scenarios.jsonl.gz log.jsonl.gz \
        [--vllm-version 0.32] [--docs docs/conformance.md --name random]

``compare`` replays every scenario of the log in simkv (:mod:`replay`), prints one line per
family (scenarios, identical step by step, steps, preemptions) and the first divergence of each
scenario that differs, and exits 1 when any differs. With ``--docs`` it rewrites the block
``<!-- conformance:NAME -->`` … ``<!-- /conformance:NAME -->`` of that file with the table.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from tools.vllm_reference.replay import Divergence, compare, simulate
from tools.vllm_reference.scenario import Scenario, random_scenario, read_jsonl_gz, write_jsonl_gz


@dataclass(frozen=True)
class Outcome:
    scenario: Scenario
    steps: int  # steps of the real engine that scheduled or preempted something
    preemptions: int
    divergence: Divergence | None


@dataclass(frozen=True)
class Result:
    versions: dict[str, str]
    vllm_version: str
    outcomes: list[Outcome]

    @property
    def identical(self) -> int:
        return sum(o.divergence is None for o in self.outcomes)

    def table(self) -> str:
        """A Markdown table: one row per family and the total."""
        rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
        for o in self.outcomes:
            family = o.scenario.family
            if o.scenario.engine.async_scheduling:
                family += ", async"
            for key in (family, "all"):
                row = rows[key]
                row[0] += 1
                row[1] += o.divergence is None
                row[2] += o.steps
                row[3] += o.preemptions
        lines = [
            "| family | scenarios | identical step by step | steps | preemptions |",
            "|---|---:|---:|---:|---:|",
        ]
        for family in [*sorted(k for k in rows if k != "all"), "all"]:
            n, same, steps, preempted = rows[family]
            name = f"**{family}**" if family == "all" else family
            lines.append(f"| {name} | {n} | {same} | {steps:,} | {preempted:,} |")
        return "\n".join(lines)

    def header(self) -> str:
        real = ", ".join(f"{k} {v}" for k, v in sorted(self.versions.items()))
        return (
            f"{self.identical} of {len(self.outcomes)} scenarios identical step by step; "
            f'real engine: {real}; simkv `vllm_v1` with `vllm_version: "{self.vllm_version}"`.'
        )


def check(scenarios: Path, log: Path, vllm_version: str) -> Result:
    """Replay every scenario the log holds and compare it step by step."""
    by_name = {s["name"]: Scenario.from_json(s) for s in read_jsonl_gz(scenarios)}
    records = iter(read_jsonl_gz(log))
    head = next(records)
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="simkv-conformance-") as folder:
        for record in records:
            scenario = by_name[str(record["name"])]
            real = record["steps"]
            if not isinstance(real, list):
                raise ValueError(f"{log}: {scenario.name}: steps must be a list")
            ours = simulate(scenario, vllm_version, Path(folder))
            work = [e for e in real if e[0] or e[1]]
            preempted = sum(len(e[1]) for e in work)
            outcomes.append(Outcome(scenario, len(work), preempted, compare(real, ours)))
    versions = head.get("versions", {})
    return Result(dict(versions) if isinstance(versions, dict) else {}, vllm_version, outcomes)


def generate(seeds: str, async_seeds: str | None = None) -> list[Scenario]:
    """The random scenarios of ``seeds`` (``FIRST:END``), then those of ``async_seeds`` with
    async scheduling."""
    scenarios = [random_scenario(s) for s in _seeds(seeds)]
    if async_seeds:
        scenarios += [random_scenario(s, async_scheduling=True) for s in _seeds(async_seeds)]
    return scenarios


def rewrite_block(doc: Path, name: str, text: str) -> None:
    """Replace the block between ``<!-- conformance:name -->`` and its end marker."""
    start, end = f"<!-- conformance:{name} -->", f"<!-- /conformance:{name} -->"
    content = doc.read_text()
    if start not in content or end not in content:
        raise SystemExit(f"{doc}: no block {start} … {end}")
    before, rest = content.split(start, 1)
    _, after = rest.split(end, 1)
    doc.write_text(f"{before}{start}\n{text}\n{end}{after}")


def _seeds(text: str) -> range:
    first, _, last = text.partition(":")
    return range(int(first), int(last)) if last else range(int(first), int(first) + 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.vllm_reference.conformance")
    commands = parser.add_subparsers(dest="command", required=True)
    gen = commands.add_parser("generate", help="random scenarios of the seeds FIRST:END")
    gen.add_argument("seeds")
    gen.add_argument("out", type=Path)
    gen.add_argument("--async-seeds", help="and these seeds with async scheduling")
    cmp_ = commands.add_parser("compare", help="replay a real engine's log in simkv")
    cmp_.add_argument("scenarios", type=Path)
    cmp_.add_argument("log", type=Path)
    cmp_.add_argument("--vllm-version", default="0.32")
    cmp_.add_argument("--docs", type=Path)
    cmp_.add_argument("--name", default="random")
    args = parser.parse_args(argv)
    if args.command == "generate":
        write_jsonl_gz(args.out, (s.to_json() for s in generate(args.seeds, args.async_seeds)))
        return 0
    result = check(args.scenarios, args.log, args.vllm_version)
    print(result.header())
    print(result.table())
    for o in result.outcomes:
        if o.divergence is not None:
            print(f"{o.scenario.name} ({o.scenario.family}) {o.divergence.describe()}")
    if args.docs is not None:
        rewrite_block(args.docs, args.name, f"{result.header()}\n\n{result.table()}")
    return 0 if result.identical == len(result.outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
