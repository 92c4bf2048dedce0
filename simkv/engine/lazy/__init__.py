"""The decode fast path: :class:`~simkv.engine.lazy.lane.DecodeLane` (the scheduler-facing
contract) over :class:`~simkv.engine.lazy.cohort.DecodeCohort` (the exact lazy state)."""

from simkv.engine.lazy.lane import DecodeLane

__all__ = ["DecodeLane"]
