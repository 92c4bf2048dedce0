"""One run path: inputs (:mod:`~simkv.run.load`, :mod:`~simkv.run.inputs`) → assemble
(:mod:`~simkv.run.assemble`) → simulate and write (:mod:`~simkv.run.simulate`). A single
engine is a fleet of one replica group."""

from simkv.run.assemble import Assembly, Stream, assemble
from simkv.run.inputs import RunInputs, check_inputs
from simkv.run.load import load_config
from simkv.run.simulate import RunOutput, build, simulate, write_run
from simkv.run.sizing import kv_sizing

__all__ = [
    "Assembly", "RunInputs", "RunOutput", "Stream", "assemble", "build", "check_inputs",
    "kv_sizing", "load_config", "simulate", "write_run",
]  # fmt: skip
