"""The plan's preview of a synthetic release: what each measurement costs and how noisy it is, from public terms only.

``fragrelease plan`` on a ``linkage: synthetic`` configuration (docs/specification.md §10). No data, no
Spark, no budget: the ε split, each marginal's noise scale and 95 % interval (of one full noise, the
Laplace's: :func:`fragrelease.accuracy.laplace_half_width`), the standard deviation of the decoded sum
(the owners' shares: ``m/(m − t)`` times one noise's variance), the cells each marginal spreads the
records over, and, when the owners' record counts are declared, the mean count per cell beside the
noise of the summed cell. A warning names the measurements whose summed cell noise is at least the
mean count of a cell (the model would then be fitted mostly to noise).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional, Sequence

from fragrelease.accuracy import laplace_half_width
from fragrelease.rng.polya import DivisibleDiscreteLaplace
from fragrelease.synthesis.mechanism import SUBSTITUTION_SENSITIVITY
from fragrelease.synthesis.protocol import SynthesisSpec


@dataclass(frozen=True)
class MeasurementRow:
    """One kind of measurement of the preview (all public).

    ``epsilon_each``: ε of one marginal (exact); ``scale``: the scale b = 2/ε_each of one full noise;
    ``half_width``: one full noise's 95 % interval of a cell (±); ``summed_sd``: the standard deviation
    of a decoded sum's cell (the m owners' shares, :meth:`~fragrelease.rng.polya.DivisibleDiscreteLaplace.variance_of_sum`); ``cells``: (fewest, most) cells of one marginal;
    ``mean_count``: (records / most cells, records / fewest cells), None without declared record counts.
    """

    what: str
    count: int
    epsilon_total: Fraction
    epsilon_each: Fraction
    scale: float
    half_width: float
    summed_sd: float
    cells: tuple[int, int]
    mean_count: Optional[tuple[float, float]]

    @property
    def drowned(self) -> bool:
        """Even the marginal with the fewest cells has a mean cell count at most the summed cell's noise."""
        return self.mean_count is not None and self.summed_sd >= self.mean_count[1]

    @property
    def partly_drowned(self) -> bool:
        """The marginal with the most cells has a mean cell count at most the summed cell's noise."""
        return self.mean_count is not None and self.summed_sd >= self.mean_count[0]


@dataclass(frozen=True)
class SynthesisPreview:
    """The preview: one :class:`MeasurementRow` per kind of measurement, and notes."""

    rows: tuple[MeasurementRow, ...]
    notes: tuple[str, ...]

    def header(self) -> list[str]:
        return ["measurement", "count", "ε (all)", "ε each", "scale b", "95 % ± (one noise)", "sd of sum",
                "cells", "records / cell"]

    def table_rows(self) -> list[list[str]]:
        out = []
        for r in self.rows:
            lo, hi = r.cells
            out.append([r.what, str(r.count), str(r.epsilon_total), str(r.epsilon_each), f"{r.scale:.3g}",
                        f"{r.half_width:.3g}", f"{r.summed_sd:.3g}", str(lo) if lo == hi else f"{lo}–{hi}",
                        "–" if r.mean_count is None else
                        f"{r.mean_count[0]:,.1f}" if lo == hi else f"{r.mean_count[0]:,.1f}–{r.mean_count[1]:,.1f}"])
        return out

    def warning_text(self) -> Optional[str]:
        drowned = [r.what for r in self.rows if r.drowned]
        if not drowned:
            return None
        return (f"the noise of the decoded sum's cell is at least the mean count of a cell for every {', '.join(drowned)}; "
                "raise ε, coarsen (synthesis_bins, fewer attributes) or add records")


def synthesis_preview(spec: SynthesisSpec, owners: int, records: Optional[int] = None) -> SynthesisPreview:
    """The preview of ``spec`` for ``owners`` horizontal owners holding ``records`` records in all (None: unknown).

    The tree's edges are chosen from round 2's decoded sums, so their cells are a range over the
    feature pairs. Source: docs/specification.md §10 (budget, protocol).
    """
    sizes = spec.domain.sizes
    budget = spec.budget
    rows = []

    def row(what: str, count: int, total: Fraction, cells: Sequence[int]) -> MeasurementRow:
        each = total / count
        scale = SUBSTITUTION_SENSITIVITY / float(each)
        fewest, most = min(cells), max(cells)
        noise = DivisibleDiscreteLaplace.calibrate(each, SUBSTITUTION_SENSITIVITY, spec.parts)
        return MeasurementRow(what, count, total, each, scale, laplace_half_width(scale),
                              math.sqrt(noise.variance_of_sum(owners)), (fewest, most),
                              None if records is None else (records / most, records / fewest))

    rows.append(row("1-way marginal", len(spec.domain.names), budget.one_way, [sizes[a] for a in spec.domain.names]))
    feats = spec.features
    if len(feats) > 1:
        pair_cells = [sizes[a] * sizes[b] for a, b in itertools.combinations(feats, 2)]
        rows.append(row("feature pair (structure, 2-way)", len(pair_cells), budget.selection, pair_cells))
        rows.append(row("tree edge (2-way)", len(feats) - 1, budget.cliques * (len(feats) - 1) / spec.clique_count,
                        pair_cells))
    if spec.target is not None:
        rows.append(row(f"{spec.target} × feature (2-way)", len(feats), budget.cliques * len(feats) / spec.clique_count,
                        [sizes[spec.target] * sizes[f] for f in feats]))
    partly = [r.what for r in rows if r.partly_drowned and not r.drowned]
    notes = [f"the largest {', '.join(partly)} would be mostly noise (its mean cell count is at most the noise of "
             "the summed cell); the tree prefers pairs whose dependence stands out of the noise"] if partly else []
    notes += [f"ε = {budget.epsilon}: 1-way marginals {budget.one_way}, feature pairs for the structure "
             f"{spec.round_epsilon(2) - budget.one_way}, cliques {budget.cliques}; every owner spends the whole ε on "
             "its own records (parallel composition)",
             f"collusion bound t = {spec.collusion} of {owners} owners: each record keeps its ε against the recipients, "
             f"the aggregator and any {spec.collusion} owners together; the shares of k = {spec.parts} owners add up "
             f"to one full noise, so the decoded sums' noise variance is {owners}/{spec.parts} times one machine's",
             "numeric attributes: " + (", ".join(f"{a.name} {a.size} bins" for a in spec.domain.attributes
                                                 if not a.categorical) or "none")]
    return SynthesisPreview(tuple(rows), tuple(notes))
