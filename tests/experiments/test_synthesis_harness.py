"""The synthesis harness's oracle tree (an evaluation upper bound, ``--oracle-tree``): the maximum spanning
tree of the exact L1 distances from independence (fragrelease.experiments.synthesis.exact_l1_tree)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from fragrelease.experiments.synthesis import exact_l1_tree
from fragrelease.synthesis.domain import CodedAttribute, SynthesisDomain


def _domain() -> SynthesisDomain:
    return SynthesisDomain(tuple(CodedAttribute(n, ("x", "y", "z")) for n in ("a", "b", "c", "d", "label")))


def test_the_oracle_tree_joins_the_dependent_pairs_first_and_leaves_the_target_out():
    gen = np.random.default_rng(7)  # a test's seed
    n = 6000
    a = gen.integers(0, 3, n)
    b = np.where(gen.random(n) < 0.9, a, gen.integers(0, 3, n))      # b follows a closely
    c = np.where(gen.random(n) < 0.5, b, gen.integers(0, 3, n))      # c follows b less closely
    d = gen.integers(0, 3, n)                                        # d independent of all
    label = a.copy()                                                 # the target: its pairs are not tree edges
    codes = pd.DataFrame({"a": a, "b": b, "c": c, "d": d, "label": label})
    tree = exact_l1_tree(_domain(), codes, "label")
    assert len(tree) == 3 and all("label" not in e for e in tree)
    assert tree[0] == ("a", "b") and tree[1] == ("b", "c")  # strongest first, then c through b (not a)
    assert {x for e in tree for x in e} == {"a", "b", "c", "d"}


def test_without_a_target_every_attribute_is_spanned():
    gen = np.random.default_rng(8)
    codes = pd.DataFrame({k: gen.integers(0, 3, 500) for k in ("a", "b", "c", "d", "label")})
    tree = exact_l1_tree(_domain(), codes, None)
    assert len(tree) == 4 and {x for e in tree for x in e} == {"a", "b", "c", "d", "label"}
