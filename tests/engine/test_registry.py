"""The scheduler registry: every scheduler config model has exactly one scheduler class,
whatever was imported before the first lookup."""

from __future__ import annotations

import subprocess
import sys

from simkv.config.policy import scheduler_models
from simkv.engine.registry import scheduler_class


def test_every_config_model_has_a_scheduler() -> None:
    for kind, model in scheduler_models().items():
        cls = scheduler_class(model)
        assert callable(getattr(cls, "build", None)), kind


def test_a_scheduler_module_imported_first_does_not_hide_the_others() -> None:
    code = (
        "import simkv.engine.schedulers.shortest_first\n"
        "from simkv.config.policy import scheduler_models\n"
        "from simkv.engine.registry import scheduler_class\n"
        "print(sorted(scheduler_class(m).__name__ for m in scheduler_models().values()))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "VllmV0Scheduler" in out.stdout and "OrcaScheduler" in out.stdout
