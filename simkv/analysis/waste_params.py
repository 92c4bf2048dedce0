"""Parameters of a waste study (:mod:`simkv.analysis.waste_study`), importable without numpy
or pandas: the ``simkv waste`` options take their defaults from :class:`WasteParams`."""

from __future__ import annotations

from typing import Self

from pydantic import PositiveInt, ValidationError, model_validator

from simkv.config.base import Frozen
from simkv.errors import InputError


class WasteParams(Frozen):
    """Parameters of a waste study; the defaults are the report's defaults.

    ``pool_slots`` 15728 is the KV slot count of OPT-13B on an A100-40GB (12 GB of KV at
    800 KiB per token); it must be a multiple of ``replay_block_size``.
    """

    block_sizes: tuple[PositiveInt, ...] = (1, 4, 8, 16, 32, 64)
    max_context_len: PositiveInt = 4096
    pool_slots: PositiveInt = 15728
    replay_requests: PositiveInt = 2000
    replay_block_size: PositiveInt = 16

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if not self.block_sizes:
            raise ValueError("block_sizes must not be empty")
        if self.pool_slots % self.replay_block_size:
            raise ValueError(
                f"pool_slots ({self.pool_slots}) must be a multiple of "
                f"replay_block_size ({self.replay_block_size})"
            )
        return self


def make_params(**values: object) -> WasteParams:
    """Validate user-supplied parameters; the first problem becomes an :class:`InputError`."""
    try:
        return WasteParams.model_validate(values)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or None
        raise InputError(first["msg"].removeprefix("Value error, "), field=field) from None
