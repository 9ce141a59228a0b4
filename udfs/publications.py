"""The anonymized publications drawn on the executors (docs/specification.md §5).

One task per publisher runs its anonymizer (:func:`fragrelease.publications.mondrian.mondrian_anonymize`
or :func:`fragrelease.publications.cloning.cloning_anonymize`), whose random orders come from
:func:`fragrelease.rng.secure.secure_permutation` (the OS CSPRNG), drawn in the task.
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from fragrelease.publications.cloning import cloning_anonymize
from fragrelease.publications.mondrian import mondrian_anonymize
from fragrelease.rng.secure import secure_permutation
from fragrelease.taxonomy import QuasiIdentifier


def anonymize_publisher(pdf: pd.DataFrame, method: str, qis: Sequence[QuasiIdentifier], sensitive: str, *,
                        k: int, l: int, mu: float, eta: int, keep: Sequence[str]) -> pd.DataFrame:
    """One publisher's rows anonymized in the task: ``method`` ``"mondrian"`` (k, l) or else cloning (k, mu, eta).

    In: ``pdf`` with the quasi-identifier columns, ``sensitive`` and ``keep``. Out: the anonymizer's
    release (its columns as documented there), rows in a CSPRNG order. Raises as the anonymizer.
    """
    if method == "mondrian":
        return mondrian_anonymize(pdf, qis, sensitive, k=k, l=l, keep=keep, permutation=secure_permutation)
    release, _ = cloning_anonymize(pdf, qis, sensitive, k=k, mu=mu, eta=eta, keep=keep, permutation=secure_permutation)
    return release
