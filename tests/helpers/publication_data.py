"""Shared test data for the publication tests (pure and Spark): Adult publishers and their releases.

Test-only: the permutations come from a seeded numpy generator, never used by a release. Test
modules import the fixtures by name (pytest picks up fixtures imported into a module).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fragrelease.publications.cloning import cloning_anonymize
from fragrelease.publications.composition import split_with_overlap
from fragrelease.publications.mondrian import mondrian_anonymize
from fragrelease.schemas.taxonomies import adult_quasi_identifiers

QIS = ("age", "sex", "education", "native-country")
COLS = ["record_id", *QIS, "occupation", "income"]


def seeded(seed):
    """A test-only permutation source: ``n -> permutation of range(n)`` from a seeded generator."""
    gen = np.random.default_rng(seed)
    return lambda n: gen.permutation(n)


def per_publisher(pdf: pd.DataFrame, fn) -> pd.DataFrame:
    """Apply ``fn`` to each publisher's rows and label the result with the publisher."""
    return pd.concat([fn(g).assign(publisher=name) for name, g in pdf.groupby("publisher")], ignore_index=True)


@pytest.fixture(scope="module")
def qis():
    return adult_quasi_identifiers(QIS)


@pytest.fixture(scope="module")
def publishers(adult_pdf):
    """Three independent publishers: 350 own Adult records each plus 300 from a shared pool of 450."""
    parts = split_with_overlap(len(adult_pdf), publishers=3, base=350, pool=450, overlap=300, permutation=seeded(11))
    return pd.concat([adult_pdf.iloc[p][COLS].assign(publisher=f"p{i}") for i, p in enumerate(parts)],
                     ignore_index=True)


@pytest.fixture(scope="module")
def mondrian_releases(publishers, qis):
    return per_publisher(publishers, lambda g: mondrian_anonymize(g, qis, "occupation", k=4, l=3, keep=["record_id"]))


@pytest.fixture(scope="module")
def cloned_releases(publishers, qis):
    order = seeded(2)
    return per_publisher(publishers, lambda g: cloning_anonymize(g, qis, "occupation", k=4, eta=2,
                                                                 keep=["record_id"], permutation=order)[0])


def micro_release(rows):
    """A micro-statistics release: (person, eq_class, multiset) per row."""
    return pd.DataFrame({"pid": [r[0] for r in rows], "eq_class": [r[1] for r in rows],
                         "disease_values": [sorted(r[2]) for r in rows],
                         "disease_counts": [[r[2][v] for v in sorted(r[2])] for r in rows]})


# P: the old code's release of A:5, B:8 (k = 1): classes 0-3 hold {A:1, B:2} with 3 real rows, class 4 holds
# {A:1, B:2} with the A row only (its two B are the stacked counterfeits). Q: person 40 in a class {A:1, B:1}.
OLD_P = micro_release([(10 * r + i, r, {"A": 1, "B": 2}) for r in range(4) for i in range(3)] + [(40, 4, {"A": 1, "B": 2})])
Q = micro_release([(40, 0, {"A": 1, "B": 1}), (41, 0, {"A": 1, "B": 1}), (0, 1, {"A": 1, "B": 1}), (42, 1, {"A": 1, "B": 1})])
