"""The fleet options of ``simkv capacity --at-rate R --options FILE``: GPU/TP choices with
their prices, among which the cheapest fleet meeting the SLOs is sought.

Each option is a name, a price per GPU-hour and the ``--set`` items that make the run config
that option (``gpu=h100-80gb``, ``parallel.tensor_parallel=2``); a replica of the option takes
``parallel.tensor_parallel`` GPUs. Prices are the user's (no price list ships with simkv): a
fleet of ``n`` replicas costs ``n × tensor_parallel × price_per_gpu_hour`` per hour, in the
file's ``currency`` (an ISO 4217 code; :data:`DEFAULT_CURRENCY` when the file names none).
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from simkv.config.base import Frozen, load_yaml, validate
from simkv.errors import InputError, all_of

MAX_OPTIONS = 64
"""Most options of one file (each is a count search of its own)."""
DEFAULT_CURRENCY = "USD"
"""The currency of an options file that names none (the prices shipped are in US dollars)."""


class FleetOption(Frozen):
    """One GPU/TP choice: the config with ``set`` applied, priced per GPU-hour."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        max_length=40,
        description="folder name of the option's search (letters, digits, _ . -)",
    )
    price_per_gpu_hour: float = Field(
        gt=0, le=1e6, description="price of one GPU for one hour, in the file's currency"
    )
    set: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="--set items making the run config this option (gpu=…, "
        "parallel.tensor_parallel=…)",
    )


class FleetOptions(Frozen):
    """The options file: ``currency:`` (ISO 4217 code of every price) and ``options:``, a list
    of :class:`FleetOption` with distinct names."""

    currency: str = Field(
        default=DEFAULT_CURRENCY,
        description="ISO 4217 code of the prices (USD, EUR, …): three capital letters",
    )
    options: list[FleetOption] = Field(min_length=1, max_length=MAX_OPTIONS)

    @field_validator("currency")
    @classmethod
    def _iso_code(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Z]{3}", value):
            raise ValueError(
                f"expected an ISO 4217 currency code of three capital letters (USD, EUR), "
                f"got {value!r}"
            )
        return value

    @model_validator(mode="after")
    def _distinct_names(self) -> FleetOptions:
        names = [option.name for option in self.options]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"option names must differ; repeated: {', '.join(twice)}")
        return self


def load_fleet_options(path: str | Path) -> FleetOptions:
    """Read and validate an options file; errors are :class:`~simkv.errors.InputError`
    (file:line)."""
    return validate(FleetOptions, load_yaml(path))


def in_options_file(path: str | Path, k: int, option: FleetOption, err: InputError) -> InputError:
    """``err``, raised by the run config with option ``k``'s items applied, each line that
    blames ``--set`` blamed instead on the item of the options file ``path`` that wrote it
    (its file:line; the option's ``set:`` line when no item matches), naming the option."""
    doc = load_yaml(path)

    def located(one: InputError) -> InputError:
        if one.file != "--set":
            return one
        j = _item_of(option.set, one)
        line = doc.line_of(("options", k, "set", *(() if j is None else (j,))))
        message = f"option {option.name}: {one.message}"
        return InputError(message, file=path, line=line, field=one.field)

    return all_of([located(one) for one in (err, *err.also)])


def _item_of(items: list[str], err: InputError) -> int | None:
    """The index of the item ``err`` is about: the one its message quotes, else the one
    setting its field, else the one setting the nearest key above or below it."""
    quoted = [j for j, item in enumerate(items) if repr(item) in err.message]
    if quoted:
        return quoted[0]
    field = err.field or ""
    keys = [item.partition("=")[0].strip() for item in items]
    if field in keys:
        return keys.index(field)
    near = [(len(key), j) for j, key in enumerate(keys) if field and key and (
        f"{field}.".startswith(f"{key}.") or key.startswith(f"{field}."))]  # fmt: skip
    return max(near)[1] if near else None
