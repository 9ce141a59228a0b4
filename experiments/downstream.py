"""Downstream utility of IR releases next to DP synthetic data on Adult (evaluation only, not the release path).

Source: the fragmented-data paper's §5 evaluates MeanSSE only; this experiment adds the measures a
user compares synthetic data by (issue 24, item 2): train a classifier on a release, test it on the
original ``adult.test``, and compare the release's marginals with the original training table.

Data: :func:`fragrelease.schemas.datasets.load_adult_train_test`: 30,162 training rows (``adult.data``)
and 15,060 test rows (``adult.test``). Released: the paper's 10 attributes (docs/specification.md
§3) **and income as an 11th protected attribute** (categories ``<=50K``, ``>50K``), so the label a
classifier learns is released under the same budget as the features.

Rows (every cell averaged over ``runs`` independent runs, 5 by default):

- ``original``: the training table itself (no protection).
- ``idp-ir`` / ``dp-ir`` × postprocess ``none`` / ``isotonic`` × ``linked`` / ``unlinked``:
  centralized IR microaggregation with k = ``k`` (default 50) and ε/11 per attribute, category order
  ``dp-frequency`` with share 0.1 (private: a Laplace histogram bought from each categorical
  attribute's ε/11, redrawn per run), the release's own steps through
  :func:`fragrelease.experiments.linkage.protect_table` (the numpy reference path: the same
  mechanism the Spark job runs, which tests check equal to it). The unlinked table permutes every
  column independently (docs/privacy.md "Linked and unlinked releases").
- ``mst`` / ``aim``: OpenDP 0.16's MST and AIM (``opendp.extras.mbi``, Private-PGM) at the same total
  ε, pure ε-DP (``dp.loss_of(epsilon=ε)``: Laplace noise, δ = 0) with privacy unit
  ``dp.unit_of(changes=1)``, i.e. the substitution of one record, the neighbouring relation of
  docs/privacy.md. Keys are the schema's declared categories, numeric attributes are cut at the
  public edges :data:`NUMERIC_CUTS`, nothing is taken from the data. The synthetic table is
  ``ContingencyTable.synthesize(method="sample")`` (:func:`synthetic_rows`; about n rows). Not the
  default ``method="round"``: OpenDP 0.16 pins mbi 1.1.0, whose rounding ranks the rows of each
  parent group by a stable sort, so two columns the model makes independent given a parent come out
  comonotone (fixed upstream in mbi 1.3.0, Private-PGM pull request 145;
  ``tests/experiments/test_downstream_sampler.py`` shows both).
- ``dpmm-mst``: dpmm 0.1.9's MST (a second implementation of MST, with its own Private-PGM and a
  sampler that shuffles) on the same public bin codes, run in its own interpreter
  (:mod:`fragrelease.experiments.dpmm_mst`: dpmm pins opendp 0.12.1); its guarantee is
  (ε, δ)-DP with Gaussian noise under zCDP (:func:`guarantee`). Its codes are decoded as OpenDP
  decodes its own (:func:`decode_codes`), so the classifiers see the same kind of table.

Measures, per row and ε:

- ``acc_lr``: accuracy on ``adult.test`` of scikit-learn ``LogisticRegression`` (one-hot encoded
  categories over the declared categories, standardized numeric attributes), trained on the release;
- ``acc_gb``: the same for ``HistGradientBoostingClassifier`` (declared categories as native
  categorical features);
- ``tvd1`` / ``tvd2``: mean total variation distance ½ Σ |p − q| ∈ [0, 1] of all 1-way (11) and 2-way
  (55) marginals of the release against the original training table (:func:`marginal_tvds`;
  numeric attributes in the bins of :data:`NUMERIC_CUTS`, the same left-open bins MST and AIM are
  given, for every row: the IR rows and the original too).

A training label set with one class only (possible when microaggregation and clamping leave one
income value) gives a classifier that predicts that class.

Each row's guarantee (column ``guarantee``, :func:`guarantee`) is stated exactly: a linked IR release
has per-column guarantees only, no table-level ε; the unlinked one and MST/AIM have a whole-table ε.

Run: ``python -m fragrelease.experiments.downstream --out docs/evaluation`` writes
``downstream.csv`` (one row per run), ``downstream-summary.csv`` and ``downstream.png``.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import tempfile
import time
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from fragrelease.errors import InvalidParameterError
from fragrelease.rng.laplace import FastLaplace, NoiseSource, evaluation_generator

from . import downstream_report
from .downstream_report import epsilon_within, markdown_table, plot, read_per_run, summarize
from .evaluation import AttributeSpec, OrderSetting
from .linkage import protect_table, unlink

TARGET = "income"
#: Adult's income labels in their declared (public) order, as adult.data writes them
INCOME = ("<=50K", ">50K")
#: Total ε per release (the whole table: ε/11 per attribute for IR releases).
EPSILONS = ("0.5", "1", "2", "4", "8")
K = 50
MECHANISMS = ("idp-ir", "dp-ir")
POSTPROCESS = ("none", "isotonic")
LINKAGES = ("linked", "unlinked")
SYNTHESIZERS = downstream_report.SYNTHESIZERS
#: Public bin edges (left-open) of the numeric attributes for MST/AIM; from the declared domains, not the data.
AGE_CUTS = tuple(range(10, 100, 10))
HOURS_CUTS = tuple(range(10, 99, 10))
#: The one public binning of the numeric attributes: the cuts MST, AIM and dpmm's MST are given and the
#: bins of every row's TVD. Cuts c_1 < … < c_m make m + 1 left-open bins (−∞, c_1], (c_1, c_2], …,
#: (c_m, ∞), as OpenDP's ``contingency_table(cuts=...)`` (``ContingencyTable.cuts``: "left-open").
NUMERIC_CUTS: Mapping[str, tuple[int, ...]] = {"age": AGE_CUTS, "hours-per-week": HOURS_CUTS}
#: The synthesizers' sampler: ``ContingencyTable.synthesize(method=SAMPLER)`` (module docstring).
SAMPLER = "sample"
#: δ of dpmm's MST ((ε, δ)-DP under zCDP; dpmm's default).
DPMM_DELTA = 1e-5


def adult_specs() -> list[AttributeSpec]:
    """The 10 released Adult attributes plus income (categorical, declared order ``<=50K``, ``>50K``)."""
    from fragrelease.schemas.datasets import BUILTIN_SCHEMAS

    specs = [AttributeSpec.from_attribute(a) for a in BUILTIN_SCHEMAS["adult"].protected]
    return specs + [AttributeSpec(TARGET, 1.0, float(len(INCOME)), True, INCOME)]


def guarantee(method: str, epsilon: str, n_attributes: int, linkage: str = "") -> str:
    """The exact privacy statement of one row (docs/privacy.md "The guarantee"; OpenDP's MST/AIM).

    Raises
    ------
    InvalidParameterError
        An unknown method or linkage.
    """
    try:
        per = f"ε/{n_attributes} = {float(epsilon) / n_attributes:.4g}"
    except ValueError:  # symbolic, for tables: guarantee("idp-ir", "ε", 11, "linked")
        per = f"ε/{n_attributes}"
    if method == "original":
        return "none: the training table itself"
    if method in ("idp-ir", "dp-ir"):
        kind = "iDP with respect to the actual training table" if method == "idp-ir" else "DP"
        if linkage == "linked":
            return (f"per column only: each of the {n_attributes} released columns is {per}-{kind} "
                    "(substitution); the joint table has no ε bound")
        if linkage == "unlinked":
            eps = "ε" if epsilon == "ε" else f"ε = {epsilon}"
            return f"whole table {eps}-{kind} (substitution; sequential composition over columns)"
        raise InvalidParameterError(f"linkage must be one of {LINKAGES}, not {linkage!r}")
    if method == "dpmm-mst":
        eps = "ε" if epsilon == "ε" else f"ε = {epsilon}"
        return (f"whole table ({eps}, δ = {DPMM_DELTA:g})-DP, approximate (Gaussian noise, zCDP; dpmm's unit: "
                "one record added or removed)")
    if method in SYNTHESIZERS:
        eps = "ε" if epsilon == "ε" else f"ε = {epsilon}"
        return f"whole table {eps}-DP, pure (δ = 0, Laplace; OpenDP unit_of(changes=1): substitution)"
    if method == "synthetic":
        eps = "ε" if epsilon == "ε" else f"ε = {epsilon}"
        return (f"whole table {eps}-DP, pure (substitution; linkage: synthetic over 4 horizontal owners, "
                "docs/specification.md §10)")
    raise InvalidParameterError(f"unknown method {method!r}")


# --------------------------------------------------------------------------------------------------
# marginals


def _cuts_of(s: AttributeSpec, cuts: Mapping[str, Sequence[float]]) -> np.ndarray:
    if s.name not in cuts:
        raise InvalidParameterError(f"no public bin edges for numeric attribute {s.name!r}")
    return np.asarray(cuts[s.name], float)


def encode_table(table: pd.DataFrame, specs: Sequence[AttributeSpec],
                 cuts: Mapping[str, Sequence[float]] = NUMERIC_CUTS) -> np.ndarray:
    """Integer codes of shape (n, l) for the marginals, and one extra code per column for null / unknown.

    Categorical: index in the declared order; numeric: the left-open bin of ``cuts`` (default
    :data:`NUMERIC_CUTS`, the bins MST/AIM are given): x ≤ c_1 is code 0, c_j < x ≤ c_{j+1} code j,
    x > c_m code m; a null or undeclared value gets code ``size`` (:func:`code_sizes` counts it).

    Raises
    ------
    InvalidParameterError
        A numeric attribute without cuts.
    """
    cols = []
    for s in specs:
        v = table[s.name]
        if s.categorical:
            index = {c: i for i, c in enumerate(s.categories)}
            cols.append(np.array([index.get(x, len(s.categories)) if isinstance(x, str) else len(s.categories)
                                  for x in v], dtype=np.int64))
        else:
            edges = _cuts_of(s, cuts)
            x = pd.to_numeric(v, errors="coerce").to_numpy(float)
            code = np.searchsorted(edges, np.nan_to_num(x, nan=edges[0]), side="left").astype(np.int64)
            cols.append(np.where(np.isnan(x), len(edges) + 1, code))
    return np.column_stack(cols)


def code_sizes(specs: Sequence[AttributeSpec], cuts: Mapping[str, Sequence[float]] = NUMERIC_CUTS) -> list[int]:
    """Codes per column of :func:`encode_table`, the null code included (categorical |dom| + 1, numeric m + 2)."""
    return [(len(s.categories) if s.categorical else len(_cuts_of(s, cuts)) + 1) + 1 for s in specs]


def decode_codes(codes: np.ndarray, specs: Sequence[AttributeSpec], rng: np.random.Generator,
                 cuts: Mapping[str, Sequence[int]] = NUMERIC_CUTS) -> pd.DataFrame:
    """A table from bin codes of shape (n, l), decoded as OpenDP 0.16 decodes its synthetic codes.

    Categorical code i is the i-th declared category; numeric bin j of integer cuts c_1 … c_m is an
    integer drawn uniformly from (e_j, e_{j+1}] with edges e = (c_1 − 1, c_1, …, c_m, c_m + 1)
    (``opendp.extras.mbi``'s ``_deindex``: bin 0 is c_1, the last bin c_m + 1). Used for dpmm's MST,
    so that its table reaches the classifiers in the form OpenDP's MST has.

    Raises
    ------
    InvalidParameterError
        A code outside [0, |dom|) or [0, m].
    """
    out = {}
    for i, s in enumerate(specs):
        c = np.asarray(codes[:, i], np.int64)
        if s.categorical:
            if ((c < 0) | (c >= len(s.categories))).any():
                raise InvalidParameterError(f"a code of {s.name!r} lies outside [0, {len(s.categories)})")
            out[s.name] = np.asarray(s.categories, object)[c]
        else:
            cut = _cuts_of(s, cuts).astype(np.int64)
            if ((c < 0) | (c > len(cut))).any():
                raise InvalidParameterError(f"a code of {s.name!r} lies outside [0, {len(cut)}]")
            edges = np.concatenate([[cut[0] - 1], cut, [cut[-1] + 1]])
            out[s.name] = rng.integers(edges[c] + 1, edges[c + 1] + 1).astype(float)
    return pd.DataFrame(out)


def marginal_tvds(original: np.ndarray, released: np.ndarray, sizes: Sequence[int]) -> tuple[float, float]:
    """Mean TVD of all 1-way and of all 2-way marginals, each in [0, 1].

    ``original`` (n, l) and ``released`` (m, l) are code tables (:func:`encode_table`); the row
    counts may differ (each table's frequencies are normalized by its own size). TVD = ½ Σ_cells
    |p − q|.

    Raises
    ------
    InvalidParameterError
        Different column counts, fewer than two columns, an empty table or a code outside ``sizes``.
    """
    if original.ndim != 2 or released.ndim != 2 or original.shape[1] != released.shape[1] or original.shape[1] < 2:
        raise InvalidParameterError(f"code tables must be (n, l >= 2) with equal l, not {original.shape} and "
                                    f"{released.shape}")
    if len(original) == 0 or len(released) == 0:
        raise InvalidParameterError("code tables must not be empty")
    for t in (original, released):
        if (t < 0).any() or (t >= np.asarray(sizes)[None, :]).any():
            raise InvalidParameterError("a code lies outside [0, size) of its column")

    def tvd(idx_p: np.ndarray, idx_q: np.ndarray, cells: int) -> float:
        p = np.bincount(idx_p, minlength=cells) / len(idx_p)
        q = np.bincount(idx_q, minlength=cells) / len(idx_q)
        return 0.5 * float(np.abs(p - q).sum())

    one = [tvd(original[:, i], released[:, i], sizes[i]) for i in range(original.shape[1])]
    two = [tvd(original[:, i] * sizes[j] + original[:, j], released[:, i] * sizes[j] + released[:, j],
               sizes[i] * sizes[j]) for i, j in itertools.combinations(range(original.shape[1]), 2)]
    return float(np.mean(one)), float(np.mean(two))


# --------------------------------------------------------------------------------------------------
# classifiers


def _features(specs: Sequence[AttributeSpec]):
    feats = [s for s in specs if s.name != TARGET]
    return [s for s in feats if s.categorical], [s for s in feats if not s.categorical]


def classifier_accuracies(train: pd.DataFrame, test: pd.DataFrame, specs: Sequence[AttributeSpec],
                          seed: int = 0) -> dict[str, float]:
    """Test accuracy of logistic regression (``acc_lr``) and gradient boosting (``acc_gb``) trained on ``train``.

    ``train``/``test``: one column per spec (the target :data:`TARGET` included). Training rows with a
    null label are dropped; numeric nulls become the middle of the declared domain; an unknown
    category is all-zero (one-hot) or missing (gradient boosting). One label only: the
    classifiers predict it.
    """
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

    cats, nums = _features(specs)
    train = train[train[TARGET].isin(next(s.categories for s in specs if s.name == TARGET))]
    y_test = test[TARGET].to_numpy(str)

    def frame(df: pd.DataFrame) -> pd.DataFrame:
        out = pd.DataFrame(index=df.index)
        for s in cats:
            out[s.name] = df[s.name].where(df[s.name].isin(s.categories), None).astype(object)
        for s in nums:
            out[s.name] = pd.to_numeric(df[s.name], errors="coerce").fillna((s.lo + s.hi) / 2).astype(float)
        return out

    y = train[TARGET].to_numpy(str)
    if len(np.unique(y)) < 2:
        const = float(np.mean(y_test == (y[0] if len(y) else "")))
        return {"acc_lr": const, "acc_gb": const}
    x_train, x_test = frame(train), frame(test)
    cat_names, num_names = [s.name for s in cats], [s.name for s in nums]
    lr = make_pipeline(
        ColumnTransformer([("cat", OneHotEncoder(categories=[list(s.categories) for s in cats],
                                                 handle_unknown="ignore"), cat_names),
                           ("num", StandardScaler(), num_names)]),
        LogisticRegression(max_iter=2000))
    gb = make_pipeline(
        ColumnTransformer([("cat", OrdinalEncoder(categories=[list(s.categories) for s in cats],
                                                  handle_unknown="use_encoded_value", unknown_value=np.nan),
                            cat_names),
                           ("num", "passthrough", num_names)]),
        HistGradientBoostingClassifier(categorical_features=list(range(len(cats))), random_state=seed))
    out = {}
    for name, model in (("acc_lr", lr), ("acc_gb", gb)):
        model.fit(x_train, y)
        out[name] = float(np.mean(model.predict(x_test) == y_test))
    return out


# --------------------------------------------------------------------------------------------------
# releases


def ir_tables(train: pd.DataFrame, specs: Sequence[AttributeSpec], *, mechanism: str, epsilon: str, k: int,
              noise: NoiseSource, rng: np.random.Generator) -> dict[tuple[str, str], pd.DataFrame]:
    """{(postprocess, linkage): released table} of one IR run (one noise draw, finished both ways)."""
    data = {s.name: train[s.name].to_numpy(object if s.categorical else float) for s in specs}
    ids = np.arange(len(train), dtype=np.int64)
    tables = protect_table(data, ids, specs, mechanism=mechanism, epsilon=epsilon, k=k, noise=noise,
                           category_order=OrderSetting.parse("dp-frequency", "0.1"))
    out = {}
    for p, t in tables.items():
        out[(p, "linked")] = pd.DataFrame(t)
        out[(p, "unlinked")] = pd.DataFrame(unlink(t, rng))
    return out


def synthetic_rows(table: Any, rows: Optional[int] = None) -> pd.DataFrame:
    """The synthetic table of an OpenDP ``ContingencyTable``, sampled i.i.d. from its model.

    ``table.synthesize(rows, method=SAMPLER)``; ``rows`` None: about the model's (noisy) total.
    Not mbi 1.1.0's default rounding, which makes the children of one parent comonotone (module
    docstring; ``tests/experiments/test_downstream_sampler.py``).
    """
    return table.synthesize(rows, method=SAMPLER).to_pandas()


def synthesize(train: pd.DataFrame, specs: Sequence[AttributeSpec], *, algorithm: str, epsilon: str,
               iters: int = 300, aim_rounds: Optional[int] = None, dpmm_python: Optional[str] = None,
               rng: Optional[np.random.Generator] = None) -> pd.DataFrame:
    """One synthetic table of ``train`` (one column per spec, about n rows) by MST, AIM or dpmm's MST.

    ``mst`` / ``aim``: OpenDP at pure ε-DP under substitution (module docstring). ``iters``:
    mirror-descent iterations of each Private-PGM fit (mbi's default is 1000; fewer make the fit
    faster and no less private: the estimation is post-processing). ``aim_rounds``: AIM's number of
    rounds (None: OpenDP 0.16's default, 16 × the number of columns).

    ``dpmm-mst``: dpmm's MST at (ε, :data:`DPMM_DELTA`)-DP, run by ``dpmm_python`` (an interpreter
    with dpmm installed) on ``train``'s :func:`encode_table` codes with the public domain
    :func:`code_sizes`; the synthetic codes come back through :func:`decode_codes` (``rng``).

    Raises
    ------
    InvalidParameterError
        An unknown algorithm, a numeric attribute without public cuts, ``dpmm-mst`` without
        ``dpmm_python`` or a failed dpmm run.
    """
    if algorithm not in SYNTHESIZERS:
        raise InvalidParameterError(f"algorithm must be one of {SYNTHESIZERS}, not {algorithm!r}")
    cats, nums = _features(specs)
    missing = [s.name for s in nums if s.name not in NUMERIC_CUTS]
    if missing:
        raise InvalidParameterError(f"no public bin edges for numeric attribute(s) {missing}")
    if algorithm == "dpmm-mst":
        return _dpmm_mst(train, specs, epsilon=epsilon, dpmm_python=dpmm_python,
                         rng=rng if rng is not None else evaluation_generator())
    import opendp.prelude as dp
    import polars as pl
    from mbi.estimation import mirror_descent

    dp.enable_features("contrib")

    def estimator(domain, loss_fn, *, potentials=None):
        return mirror_descent(domain, loss_fn, potentials=potentials, iters=iters)

    alg = (dp.mbi.MST(estimator=estimator) if algorithm == "mst"
           else dp.mbi.AIM(estimator=estimator, rounds=aim_rounds))
    names = [s.name for s in specs]
    lf = pl.from_pandas(train[names]).with_columns(*[pl.col(s.name).cast(pl.Int64) for s in nums]).lazy()
    cuts = {s.name: list(NUMERIC_CUTS[s.name]) for s in nums}
    ctx = dp.Context.compositor(data=lf, privacy_unit=dp.unit_of(changes=1),
                                privacy_loss=dp.loss_of(epsilon=float(epsilon)), split_evenly_over=1,
                                margins=[dp.polars.Margin(max_length=10 * len(train))])  # public bound on n
    table = (ctx.query().contingency_table(keys={s.name: list(s.categories) for s in specs if s.categorical},
                                           cuts=cuts, algorithm=alg).release())
    return synthetic_rows(table)


def _dpmm_mst(train: pd.DataFrame, specs: Sequence[AttributeSpec], *, epsilon: str, dpmm_python: Optional[str],
              rng: np.random.Generator) -> pd.DataFrame:
    if not dpmm_python:
        raise InvalidParameterError("dpmm-mst needs an interpreter with dpmm installed (--dpmm-python): dpmm 0.1.9 "
                                    "pins opendp 0.12.1, fragrelease opendp 0.16")
    codes = encode_table(train, specs)
    sizes = code_sizes(specs)
    # the null code is not offered to dpmm: the training table has no null (adult.data cleaned)
    names = [s.name for s in specs]
    if any((codes[:, i] >= sizes[i] - 1).any() for i in range(len(specs))):
        raise InvalidParameterError("dpmm-mst: the training table has a null or undeclared value")
    runner = os.path.join(os.path.dirname(os.path.realpath(__file__)), "dpmm_mst.py")
    with tempfile.TemporaryDirectory(prefix="dpmm-") as tmp:
        paths = [os.path.join(tmp, f) for f in ("codes.csv", "domain.json", "synthetic.csv")]
        pd.DataFrame(codes, columns=names).to_csv(paths[0], index=False)
        with open(paths[1], "w", encoding="utf-8") as f:
            json.dump({n: size - 1 for n, size in zip(names, sizes)}, f)
        done = subprocess.run([dpmm_python, runner, *paths, "--epsilon", str(float(epsilon)), "--delta",
                               repr(DPMM_DELTA)], capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise InvalidParameterError(f"dpmm-mst: {dpmm_python} {runner} failed: {tail}")
        synth = pd.read_csv(paths[2])
    return decode_codes(synth[names].to_numpy(np.int64), specs, rng)


# --------------------------------------------------------------------------------------------------
# experiment


def run_experiment(train: pd.DataFrame, test: pd.DataFrame, *, epsilons: Sequence[str] = EPSILONS, runs: int = 5,
                   k: int = K, mechanisms: Sequence[str] = MECHANISMS, synthesizers: Sequence[str] = SYNTHESIZERS,
                   synth_epsilons: Optional[Sequence[str]] = None, synth_runs: Optional[int] = None,
                   iters: int = 300, aim_rounds: Optional[int] = None, dpmm_python: Optional[str] = None,
                   original: bool = True,
                   progress: Callable[[str], None] = lambda m: None,
                   checkpoint: Callable[[pd.DataFrame], None] = lambda rows: None) -> pd.DataFrame:
    """One row per (method, postprocess, linkage, ε, run) with accuracies, TVDs, guarantee and seconds.

    ``synth_epsilons`` / ``synth_runs``: the grid of MST/AIM when it must be smaller than the IR grid
    (defaults: ``epsilons`` / ``runs``). ``original=False`` leaves out the rows of the original table
    (when parts of the grid run in separate processes). ``checkpoint`` receives the rows so far after
    every MST/AIM table (a synthesizer fit takes minutes). ``dpmm_python``: the interpreter of
    ``dpmm-mst`` (:func:`synthesize`).

    Raises
    ------
    InvalidParameterError
        runs < 1 or an empty table.
    """
    if runs < 1:
        raise InvalidParameterError(f"runs must be >= 1, not {runs}")
    if len(train) == 0 or len(test) == 0:
        raise InvalidParameterError("train and test tables must not be empty")
    specs = adult_specs()
    sizes = code_sizes(specs)
    orig_codes = encode_table(train, specs)
    noise, rng = FastLaplace(), evaluation_generator()
    rows: list[dict] = []

    def measure(table: pd.DataFrame, seed: int, **keys) -> None:
        t0 = time.perf_counter()
        tvd1, tvd2 = marginal_tvds(orig_codes, encode_table(table, specs), sizes)
        rows.append({**keys, "rows": len(table), **classifier_accuracies(table, test, specs, seed=seed),
                     "tvd1": tvd1, "tvd2": tvd2, "measure_seconds": time.perf_counter() - t0,
                     "guarantee": guarantee(keys["method"], keys["epsilon"], len(specs), keys["linkage"])})

    for run in range(runs if original else 0):
        measure(train, run, method="original", postprocess="", linkage="", epsilon="inf", k=0, run=run,
                release_seconds=0.0)
    for mech in mechanisms:
        for eps in epsilons:
            for run in range(runs):
                t0 = time.perf_counter()
                tables = ir_tables(train, specs, mechanism=mech, epsilon=eps, k=k, noise=noise, rng=rng)
                sec = time.perf_counter() - t0
                for (p, lk), table in tables.items():
                    measure(table, run, method=mech, postprocess=p, linkage=lk, epsilon=eps, k=k, run=run,
                            release_seconds=sec)
                progress(f"{mech} eps={eps} run={run}")
    for alg in synthesizers:
        for eps in synth_epsilons or epsilons:
            for run in range(synth_runs or runs):
                t0 = time.perf_counter()
                table = synthesize(train, specs, algorithm=alg, epsilon=eps, iters=iters, aim_rounds=aim_rounds,
                                   dpmm_python=dpmm_python, rng=rng)
                sec = time.perf_counter() - t0
                measure(table, run, method=alg, postprocess="", linkage="", epsilon=eps, k=0, run=run,
                        release_seconds=sec)
                progress(f"{alg} eps={eps} run={run}: {sec:.0f} s")
                checkpoint(pd.DataFrame(rows))
    return pd.DataFrame(rows)


def main(argv: Optional[Sequence[str]] = None) -> dict:
    from fragrelease.schemas.datasets import load_adult_train_test

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/evaluation")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--epsilons", nargs="+", default=list(EPSILONS))
    ap.add_argument("--k", type=int, default=K)
    ap.add_argument("--mechanisms", nargs="*", default=list(MECHANISMS))
    ap.add_argument("--synthesizers", nargs="*", default=list(SYNTHESIZERS))
    ap.add_argument("--synth-epsilons", nargs="+")
    ap.add_argument("--synth-runs", type=int)
    ap.add_argument("--iters", type=int, default=300, help="Private-PGM mirror-descent iterations per fit")
    ap.add_argument("--aim-rounds", type=int, help="AIM's rounds (default: OpenDP's, 16 x the number of columns)")
    ap.add_argument("--dpmm-python", help="an interpreter with dpmm installed, for --synthesizers dpmm-mst "
                                          "(dpmm pins opendp 0.12.1: its own venv)")
    ap.add_argument("--train-rows", type=int, help="first N training rows only (smoke tests)")
    ap.add_argument("--test-rows", type=int, help="first N test rows only (smoke tests)")
    ap.add_argument("--name", default="downstream", help="file name stem of the outputs")
    ap.add_argument("--no-original", action="store_true", help="leave out the original table's rows")
    ap.add_argument("--from-csv", nargs="+", metavar="CSV",
                    help="summarize and plot per-run CSVs of earlier runs (e.g. IR rows and MST/AIM rows run "
                         "separately) instead of running")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    t0 = time.perf_counter()
    if a.from_csv:
        per_run = pd.concat([read_per_run(f) for f in a.from_csv], ignore_index=True)
    else:
        train, test = load_adult_train_test()
        if a.train_rows:
            train = train.iloc[:a.train_rows]
        if a.test_rows:
            test = test.iloc[:a.test_rows]
        per_run = run_experiment(train, test, epsilons=a.epsilons, runs=a.runs, k=a.k, mechanisms=a.mechanisms,
                                 synthesizers=a.synthesizers, synth_epsilons=a.synth_epsilons,
                                 synth_runs=a.synth_runs, iters=a.iters, aim_rounds=a.aim_rounds,
                                 dpmm_python=a.dpmm_python,
                                 original=not a.no_original, progress=lambda m: print(m, flush=True),
                                 checkpoint=lambda rows: rows.to_csv(os.path.join(a.out, f"{a.name}.csv"),
                                                                     index=False, float_format="%.6g"))
    per_run.to_csv(os.path.join(a.out, f"{a.name}.csv"), index=False, float_format="%.6g")
    if not (per_run["method"] == "original").any():
        print(f"downstream: {len(per_run)} rows (no original rows: summarize with --from-csv) -> {a.out}/{a.name}.csv")
        return {"per_run": per_run, "seconds": time.perf_counter() - t0}
    summary = summarize(per_run)
    summary.to_csv(os.path.join(a.out, f"{a.name}-summary.csv"), index=False, float_format="%.6g")
    within = pd.concat([epsilon_within(summary, m) for m in ("acc_lr", "acc_gb")], ignore_index=True)
    within.to_csv(os.path.join(a.out, f"{a.name}-within.csv"), index=False)
    fig = plot(summary, os.path.join(a.out, f"{a.name}.png"))
    seconds = time.perf_counter() - t0
    pd.set_option("display.width", 250)
    print(summary.drop(columns=["guarantee"]).to_string(index=False))
    print(within.to_string(index=False))
    print(markdown_table(summary, within, lambda method, linkage: guarantee(method, "ε", len(adult_specs()), linkage)))
    print(f"downstream: {len(per_run)} rows in {seconds:.1f} s -> {a.out}/{a.name}*.csv, {fig}")
    return {"per_run": per_run, "summary": summary, "within": within, "seconds": seconds, "figure": fig}


if __name__ == "__main__":
    main()
