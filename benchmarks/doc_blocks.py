"""Generated blocks inside a generated document: ``<!-- name:start -->`` … ``<!-- name:end -->``.

docs/fidelity.md is written by benchmarks/fidelity.py, except its "sim vs real" block, which
benchmarks/sim_vs_real.py writes, its "cross-gpu" block, which benchmarks/cross_gpu.py writes
(and sim_vs_real.py through it), its "cpu-live" block, which benchmarks/cpu_live.py writes, and
its "saturation" block, which benchmarks/saturation.py writes; each script keeps the others'
parts (:data:`KEPT`).
"""

from __future__ import annotations

from pathlib import Path

from simkv.outputs import write_file


def _marks(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def block_of(text: str, name: str) -> str | None:
    """The block ``name`` of ``text``, markers included, or None."""
    start, end = _marks(name)
    i, j = text.find(start), text.find(end)
    return text[i : j + len(end)] if 0 <= i < j else None


def with_block(text: str, name: str, body: str) -> str:
    """``text`` with block ``name`` holding ``body`` (replaced in place, else appended)."""
    start, end = _marks(name)
    block = f"{start}\n{body.strip()}\n{end}"
    old = block_of(text, name)
    if old is not None:
        return text.replace(old, block)
    return text.rstrip() + "\n\n" + block + "\n"


def write_block(path: Path, name: str, body: str) -> None:
    """Replace (or append) block ``name`` of the file at ``path`` by ``body``."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    path.write_text(with_block(text, name, body), encoding="utf-8")


def publish(text: str, path: Path, write: bool) -> None:
    """Print a generated document; with ``write`` (``--write-docs``) also replace ``path``."""
    print(text)
    if write:
        write_file(path, text)
        print(f"wrote {path}")


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub markdown table of ``header`` and ``rows`` (cells already formatted)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join([*lines, *("| " + " | ".join(row) + " |" for row in rows)])


SIM_VS_REAL = "sim-vs-real"
CROSS_GPU = "cross-gpu"
CPU_LIVE = "cpu-live"
SATURATION = "saturation"
KEPT = (SIM_VS_REAL, CROSS_GPU, CPU_LIVE, SATURATION)
"""The blocks of docs/fidelity.md that benchmarks/fidelity.py keeps when it rewrites the file."""
