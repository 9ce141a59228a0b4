"""Downstream utility next to DP synthetic data: the marginal TVDs, the guarantees, the classifiers, a small run."""
import numpy as np
import pandas as pd
import pytest

from fragrelease.errors import InvalidParameterError
from fragrelease.experiments.downstream import (
    TARGET,
    adult_specs,
    classifier_accuracies,
    code_sizes,
    encode_table,
    guarantee,
    main,
    marginal_tvds,
    run_experiment,
)
from fragrelease.experiments.downstream_report import epsilon_within, read_per_run, summarize
from fragrelease.schemas.datasets import load_adult_train_test

SPECS = adult_specs()


@pytest.fixture(scope="module")
def split():
    train, test = load_adult_train_test()
    return train, test


def test_adult_split_is_the_distributed_one(split):
    train, test = split
    assert (len(train), len(test)) == (30162, 15060)
    assert set(test[TARGET]) == {"<=50K", ">50K"}  # the test file's trailing '.' is stripped
    assert [s.name for s in SPECS][-1] == TARGET and len(SPECS) == 11


def test_marginal_tvds_hand_examples():
    sizes = [2, 2]
    orig = np.array([[0, 0], [1, 1]])
    assert marginal_tvds(orig, orig, sizes) == (0.0, 0.0)
    # same 1-way marginals, disjoint 2-way cells
    assert marginal_tvds(orig, np.array([[0, 1], [1, 0]]), sizes) == (0.0, 1.0)
    # different row counts: frequencies of each table. released column 0 is {0: 3/4, 1: 1/4} -> TVD 1/4
    rel = np.array([[0, 0], [0, 0], [0, 0], [1, 1]])
    one, two = marginal_tvds(orig, rel, sizes)
    assert one == pytest.approx((0.25 + 0.25) / 2)
    assert two == pytest.approx(0.25)  # cells 00: 1/2 vs 3/4, 11: 1/2 vs 1/4
    with pytest.raises(InvalidParameterError):
        marginal_tvds(orig, np.array([[0, 2]]), sizes)  # code outside its column's size
    with pytest.raises(InvalidParameterError):
        marginal_tvds(orig, orig[:, :1], sizes)


def test_encode_table_bins_the_public_cuts_and_codes_nulls_apart():
    table = pd.DataFrame({s.name: [s.categories[0] if s.categorical else s.lo] * 3 for s in SPECS})
    table.loc[1, "age"] = 100.0       # above the last cut (90): the last bin
    table.loc[2, "age"] = np.nan      # null: its own code
    table.loc[2, "workclass"] = None
    table.loc[1, "workclass"] = "Astronaut"  # undeclared: the null code too
    codes = encode_table(table, SPECS)
    sizes = code_sizes(SPECS)
    age, work = [s.name for s in SPECS].index("age"), [s.name for s in SPECS].index("workclass")
    assert codes[:, age].tolist() == [0, 9, 10] and sizes[age] == 11  # 9 cuts: 10 bins and the null code
    assert codes[:, work].tolist() == [0, 8, 8] and sizes[work] == 9  # 8 declared workclasses
    assert (codes < np.array(sizes)[None, :]).all()


def test_every_row_states_its_guarantee():
    linked = guarantee("idp-ir", "1", 11, "linked")
    assert "per column only" in linked and "no ε bound" in linked and "0.09091" in linked and "iDP" in linked
    assert guarantee("dp-ir", "2", 11, "unlinked").startswith("whole table ε = 2-DP")
    assert "pure" in guarantee("mst", "4", 11) and "substitution" in guarantee("aim", "4", 11)
    with pytest.raises(InvalidParameterError):
        guarantee("idp-ir", "1", 11, "sideways")


def test_classifiers_learn_from_the_original_and_a_single_label_predicts_it(split):
    train, test = split
    train, test = train.sample(3000, random_state=1), test.iloc[:2000]
    acc = classifier_accuracies(train, test, SPECS)
    majority = float((test[TARGET] == "<=50K").mean())
    assert acc["acc_lr"] > majority + 0.03 and acc["acc_gb"] > majority + 0.03
    one = train.assign(**{TARGET: "<=50K"})
    assert classifier_accuracies(one, test, SPECS) == {"acc_lr": majority, "acc_gb": majority}


def test_epsilon_within_one_point():
    summary = pd.DataFrame({
        "method": ["original", "idp-ir", "idp-ir", "idp-ir", "mst", "mst"],
        "postprocess": ["", "isotonic", "isotonic", "isotonic", "", ""],
        "linkage": ["", "linked", "linked", "linked", "", ""],
        "epsilon": ["inf", "0.5", "1", "2", "1", "2"],
        "acc_lr": [0.85, 0.80, 0.842, 0.845, 0.70, 0.75]})
    got = epsilon_within(summary, "acc_lr").set_index("method")["eps_within"]
    assert got["idp-ir"] == "1" and got["mst"] is None


@pytest.mark.slow  # a whole release end to end (or processes of their own): CI runs it; the quick loop leaves it out
def test_small_run_end_to_end(split, tmp_path):
    train, test = split
    per_run = run_experiment(train.iloc[:800], test.iloc[:400], epsilons=["8"], runs=1, k=20,
                             mechanisms=["idp-ir"], synthesizers=[])
    assert len(per_run) == 1 + 4  # the original, then none/isotonic x linked/unlinked
    assert per_run[["acc_lr", "acc_gb", "tvd1", "tvd2"]].apply(lambda c: c.between(0, 1).all()).all()
    orig = per_run[per_run["method"] == "original"].iloc[0]
    assert orig["tvd1"] == 0.0 and orig["tvd2"] == 0.0
    ir = per_run[per_run["method"] == "idp-ir"]
    # unlinked keeps every column's multiset: the same 1-way marginals as the linked table of the same draw
    for p in ("none", "isotonic"):
        pair = ir[ir["postprocess"] == p].set_index("linkage")
        assert pair.loc["linked", "tvd1"] == pytest.approx(pair.loc["unlinked", "tvd1"])
        assert pair.loc["unlinked", "guarantee"].startswith("whole table")
    s = summarize(per_run)
    assert set(s["runs"]) == {1}
    # the command on a tiny subsample, and summarizing its CSV again
    main(["--out", str(tmp_path), "--runs", "1", "--epsilons", "8", "--mechanisms", "dp-ir", "--synthesizers",
          "--train-rows", "600", "--test-rows", "300", "--k", "20"])
    again = read_per_run(str(tmp_path / "downstream.csv"))
    assert set(again["method"]) == {"original", "dp-ir"} and (again["epsilon"].isin(["inf", "8"])).all()
    assert (tmp_path / "downstream.png").stat().st_size > 0


@pytest.mark.slow
def test_mst_synthesizes_the_declared_columns(split, monkeypatch):
    pytest.importorskip("mbi")
    from fragrelease.experiments.downstream import synthesize

    # 7 of the 11 columns, both numeric ones and the target among them: MST's cost here is JAX compiling
    # the Private-PGM programs of its tree (about 42 s for all 11 columns, 21 s for these 7, on 2 cores)
    specs = [s for s in SPECS if s.name in ("age", "workclass", "education", "race", "sex", "hours-per-week", TARGET)]
    train = split[0].iloc[:2000]
    from opendp.extras.mbi import ContingencyTable

    methods = []
    real = ContingencyTable.synthesize

    def spy(self, rows=None, method="round"):
        methods.append(method)
        return real(self, rows, method)

    monkeypatch.setattr(ContingencyTable, "synthesize", spy)
    syn = synthesize(train, specs, algorithm="mst", epsilon="8", iters=50)
    assert methods == ["sample"]  # i.i.d. sampling, not mbi 1.1.0's comonotone rounding
    # the numeric columns come back in the public bins (left-open cuts 10, ..., 90: values 10 ... 91)
    assert syn["age"].between(10, 91).all() and syn["hours-per-week"].between(10, 91).all()
    assert list(syn.columns) == [s.name for s in specs]
    assert abs(len(syn) - len(train)) < 200  # about n rows (n is not spent on: the unit is a substitution)
    assert set(syn[TARGET].dropna()) <= {"<=50K", ">50K"}
