"""The CLI imports the library lazily: ``simkv --help`` loads neither pandas nor the engine nor
the report stack (each command imports what it uses)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pandas", "matplotlib", "jinja2", "simpy", "scipy", "pyarrow", "simkv.run",
         "simkv.engine", "simkv.report", "simkv.workload", "simkv.sweep.run")  # fmt: skip
PROBE = (
    "import sys\n"
    "from typer.testing import CliRunner\n"
    "from simkv.cli import app\n"
    "assert CliRunner().invoke(app, ['--help']).exit_code == 0\n"
    f"heavy = {HEAVY!r}\n"
    "print(sorted({m for m in sys.modules for h in heavy if m == h or m.startswith(h + '.')}))\n"
)


def test_help_imports_no_heavy_module() -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    assert proc.stdout.strip() == "[]", proc.stdout


def test_the_report_stack_loads_no_engine() -> None:
    """``simkv report`` and ``simkv compare`` rebuild pages from files: no simulation code."""
    probe = (
        "import sys, simkv.report.run_report, simkv.report.compare_real\n"
        "print(sorted(m for m in ('simkv.run', 'simkv.engine', 'simpy') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    assert proc.stdout.strip() == "[]", proc.stdout
