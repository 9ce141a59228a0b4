"""The synthesizers' sampler and bins: i.i.d. sampling (not mbi 1.1.0's comonotone rounding), one public binning.

A model with one parent ``p`` and two children ``a``, ``b`` that are independent given ``p`` (a
two-column tree of Private-PGM: cliques (p, a) and (p, b), uniform potentials) must give synthetic
rows whose children are uncorrelated. mbi 1.1.0's ``synthetic_data(method="round")``, the default
of OpenDP 0.16's ``ContingencyTable.synthesize()``, ranks the rows of each parent group by a stable
sort and gives both children the same ranks, so they come out comonotone (correlation near 1).
"""
import json
import os
import subprocess

import numpy as np
import pandas as pd
import pytest

from fragrelease.errors import InvalidParameterError
from fragrelease.experiments import downstream
from fragrelease.experiments.downstream import (
    NUMERIC_CUTS,
    SAMPLER,
    adult_specs,
    code_sizes,
    decode_codes,
    encode_table,
    guarantee,
    synthesize,
    synthetic_rows,
)

SPECS = adult_specs()
ROWS = 4000


def _tree_table():
    """An OpenDP ContingencyTable over the tree p -> a, p -> b with a, b independent given p."""
    pytest.importorskip("mbi")
    from mbi import CliqueVector, Domain, MarkovRandomField
    from opendp.extras.mbi import ContingencyTable

    domain = Domain(["p", "a", "b"], [2, 3, 3])
    potentials = CliqueVector.zeros(domain, [("p", "a"), ("p", "b")])
    model = MarkovRandomField(potentials=potentials, marginals=potentials, total=ROWS)
    keys = {"p": ["p0", "p1"], "a": ["a0", "a1", "a2"], "b": ["b0", "b1", "b2"]}
    return ContingencyTable(keys=keys, cuts={}, marginals={}, model=model)


def _children(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    return df["a"].str[1].astype(int).to_numpy(), df["b"].str[1].astype(int).to_numpy()


def test_the_sampler_keeps_independent_children_independent():
    rows = synthetic_rows(_tree_table())
    a, b = _children(rows)
    assert len(rows) == ROWS
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.5  # i.i.d.: about 0 (sd 1/sqrt(4000) = 0.016)
    assert np.mean(a == b) < 0.5                # the model's P(a = b) is 1/3
    for col in (a, b):                          # and the model's marginals: uniform over 3 values
        assert np.abs(np.bincount(col, minlength=3) / ROWS - 1 / 3).max() < 0.05


def test_mbi_1_1_0_rounding_is_comonotone_upstream_bug():
    """Documents the upstream bug this module avoids (fixed in mbi 1.3.0, Private-PGM pull request 145).

    When OpenDP's pin moves to a fixed mbi this assertion fails: then ``method="round"`` could be
    the sampler again (and this test goes).
    """
    rows = _tree_table().synthesize(method="round").to_pandas()
    a, b = _children(rows)
    assert np.corrcoef(a, b)[0, 1] > 0.5 and np.mean(a == b) > 0.9
    assert SAMPLER == "sample"


def test_tvd_bins_are_the_cuts_the_synthesizers_get():
    ages = [0, 10, 10.5, 20, 55, 90, 90.5, 100, np.nan]
    table = pd.DataFrame({s.name: [s.categories[0] if s.categorical else s.lo] * len(ages) for s in SPECS})
    table["age"] = ages
    age = [s.name for s in SPECS].index("age")
    # left-open bins (-inf, 10], (10, 20], ..., (90, inf) as OpenDP's cuts; a null has its own code
    assert encode_table(table, SPECS)[:, age].tolist() == [0, 0, 1, 1, 5, 8, 9, 9, 10]
    assert code_sizes(SPECS)[age] == len(NUMERIC_CUTS["age"]) + 2
    with pytest.raises(InvalidParameterError):
        encode_table(table, SPECS, cuts={"age": NUMERIC_CUTS["age"]})  # hours-per-week has no cuts


def test_decoded_codes_fall_in_their_bins_as_opendp_decodes_them():
    pytest.importorskip("mbi")
    import polars as pl
    from opendp.extras.mbi._table import _deindex

    rng = np.random.default_rng(3)  # seeds only in tests
    nums = [s for s in SPECS if not s.categorical]
    codes = np.zeros((200, len(SPECS)), np.int64)
    for i, s in enumerate(SPECS):
        size = len(s.categories) if s.categorical else len(NUMERIC_CUTS[s.name]) + 1
        codes[:, i] = np.arange(200) % size
    table = decode_codes(codes, SPECS, rng)
    assert (encode_table(table, SPECS) == codes).all()  # the TVD reads back the bin each row was drawn in
    for s in nums:
        i = [t.name for t in SPECS].index(s.name)
        opendp = _deindex(codes[:, i], pl.Series(range(len(NUMERIC_CUTS[s.name]) + 1)),
                          cuts=pl.Series(list(NUMERIC_CUTS[s.name])))
        # OpenDP's decoding puts every code in the same bin, with the same end values (c_1 and c_m + 1)
        assert (encode_table(pd.DataFrame({**{t.name: table[t.name] for t in SPECS}, s.name: opendp}),
                             SPECS)[:, i] == codes[:, i]).all()
        assert set(table.loc[codes[:, i] == 0, s.name]) == {NUMERIC_CUTS[s.name][0]}
    with pytest.raises(InvalidParameterError):
        decode_codes(codes + 100, SPECS, rng)


def test_dpmm_needs_its_own_interpreter_and_states_its_guarantee():
    train = pd.DataFrame({s.name: [s.categories[0] if s.categorical else s.lo] * 3 for s in SPECS})
    with pytest.raises(InvalidParameterError, match="dpmm-python"):
        synthesize(train, SPECS, algorithm="dpmm-mst", epsilon="1")
    g = guarantee("dpmm-mst", "1", 11)
    assert "δ = 1e-05" in g and "Gaussian" in g and "added or removed" in g and "pure" not in g


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("FRAGRELEASE_DPMM_PYTHON"),
                    reason="FRAGRELEASE_DPMM_PYTHON names no interpreter with dpmm (it pins opendp 0.12.1: own venv)")
def test_dpmm_mst_runs_in_its_interpreter_on_public_codes(tmp_path):
    """dpmm's MST (experiments/dpmm_mst.py) on the tree p -> a, p -> b: codes inside the domain, about n
    rows, and its sampler (a shuffling rounding) keeps the independent children uncorrelated."""
    rng = np.random.default_rng(5)  # seeds only in tests
    n = 3000
    p = rng.integers(0, 2, n)
    data = pd.DataFrame({"p": p, "a": (p + rng.integers(0, 2, n)) % 3, "b": (p + rng.integers(0, 2, n)) % 3})
    data.to_csv(tmp_path / "codes.csv", index=False)
    (tmp_path / "domain.json").write_text(json.dumps({"p": 2, "a": 3, "b": 3}))
    runner = os.path.join(os.path.dirname(os.path.realpath(downstream.__file__)), "dpmm_mst.py")
    done = subprocess.run([os.environ["FRAGRELEASE_DPMM_PYTHON"], runner, str(tmp_path / "codes.csv"),
                           str(tmp_path / "domain.json"), str(tmp_path / "out.csv"), "--epsilon", "4",
                           "--delta", "1e-5"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    out = pd.read_csv(tmp_path / "out.csv")
    assert list(out.columns) == ["p", "a", "b"] and abs(len(out) - n) < 300
    assert out["p"].between(0, 1).all() and out["a"].between(0, 2).all() and out["b"].between(0, 2).all()
    # given p, a and b are independent in the data; comonotone output would give P(a = b) near 1
    assert np.mean(out["a"] == out["b"]) < 0.8 and np.mean(data["a"] == data["b"]) < 0.8


def test_aim_runs_with_opendps_default_rounds_and_workload():
    """docs/evaluation.md: AIM at OpenDP 0.16's default, at most 16 rounds per column, ε/T per round first,
    quadrupled after a round that is not significant; workload: marginals of up to 3 attributes."""
    import inspect

    pytest.importorskip("mbi")
    import opendp.prelude as dp
    from opendp.extras.mbi import _aim

    assert inspect.signature(synthesize).parameters["aim_rounds"].default is None
    aim = dp.mbi.AIM()
    assert aim.rounds is None and aim.queries == 3
    source = inspect.getsource(_aim.AIM.make_marginals)
    assert "T = algorithm.rounds or (16 * len(input_domain.columns))" in source
    assert "d_step = d_out / T" in source and "d_step *= 4" in source
