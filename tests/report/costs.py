"""The check that every cost on a page carries its currency, shared by the options page's tests
(its HTML parsed here) and the browser test (its tables and text as Chromium reads them)."""

from __future__ import annotations

import html
import re

from simkv.report.conventions import money_unit

COST_WORDS = ("price", "/h", " per M ")
"""A column whose header holds one of these (with the currency's unit) holds costs; not
a rate per cost (``req/s per $/h``)."""
PER_HOUR = re.compile(r"(\S*\d\S*) per hour")
"""A sentence's cost: the number before "per hour" (``$3.50 per hour``)."""


def table_cells(page: str) -> list[list[list[str]]]:
    """Every ``<table>`` of ``page`` as rows of cell texts (tags stripped, entities decoded)."""
    tables = []
    for table in re.findall(r"<table.*?</table>", page, flags=re.S):
        rows = re.findall(r"<tr.*?</tr>", table, flags=re.S)
        tables.append([[html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
                        for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, flags=re.S)]
                       for row in rows])  # fmt: skip
    return tables


def page_text(page: str) -> str:
    """The visible text of ``page``'s body outside ``<svg>`` (figures are paths)."""
    body = re.sub(r"<svg.*?</svg>|<style.*?</style>", " ", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


def _is_cost(header: str, unit: str) -> bool:
    if header.startswith("req/s"):
        return False
    return "price" in header or (unit in header and any(w in header for w in COST_WORDS))


def bare_costs(tables: list[list[list[str]]], text: str, currency: str) -> list[str]:
    """Costs without the currency: cells of cost columns (header naming the currency's unit
    with ``/h``, ``per M`` or ``price``) and the amount before each "per hour" of ``text``."""
    unit, found = money_unit(currency), []
    for rows in tables:
        header, *body = rows
        costs = [i for i, h in enumerate(header) if _is_cost(h, unit)]
        found += [f"{header[i]}: {row[i]!r}" for row in body for i in costs
                  if row[i] not in ("—", "") and unit not in row[i]]  # fmt: skip
    found += [f"{m.group(0)!r}" for m in PER_HOUR.finditer(text) if unit not in m.group(1)]
    return found


def cost_cells(tables: list[list[list[str]]], currency: str) -> int:
    """How many cost cells :func:`bare_costs` looks at (so a test sees it looked)."""
    unit = money_unit(currency)
    return sum(
        1 for header, *body in tables for row in body for i, h in enumerate(header)
        if _is_cost(h, unit) and row[i] != "—"
    )  # fmt: skip
