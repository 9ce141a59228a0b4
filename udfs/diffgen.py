"""DiffGen's synthetic records drawn on the executors (docs/specification.md §7).

Post-processing of the released noisy counts: each task draws record values uniformly inside their
generalized cells (:func:`fragrelease.diffgen.release.synthesize_cells`) from a fast numpy
generator seeded from the OS CSPRNG (:func:`fragrelease.rng.laplace.evaluation_generator`), one per task.
"""
from __future__ import annotations

from typing import Callable, Iterator, Mapping

import pandas as pd

from fragrelease.diffgen.engine import Cut
from fragrelease.diffgen.release import synthesize_cells
from fragrelease.rng.laplace import evaluation_generator


def cell_values_fn(cut: Cut, code_columns: Mapping[str, str], class_column: str
                   ) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """A ``mapInPandas`` function: rows of cell codes -> rows of values drawn inside the cells.

    Columns in: ``code_columns[a]`` (the cell index of attribute ``a``, for each ``a`` in
    ``cut.attributes``) and ``class_column``. Columns out: ``cut.attributes`` (the drawn values) and
    ``class_column`` (copied). Not privacy-relevant (post-processing of released counts); the draws
    are fresh on every evaluation, so the caller writes the frame once.
    """

    def draw(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        gen = evaluation_generator()
        for pdf in batches:
            codes = {a: pdf[code_columns[a]].to_numpy() for a in cut.attributes}
            vals = synthesize_cells(cut, codes, gen)
            yield pd.DataFrame({**{a: vals[a] for a in cut.attributes}, class_column: pdf[class_column].to_numpy()})

    return draw
