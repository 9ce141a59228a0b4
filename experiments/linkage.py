"""What linkage buys: multivariate utility of linked and unlinked IR releases, Spark-free (issue 15, item 5).

MeanSSE scores one attribute at a time and cannot tell a linked release (the paper's: every row
carries its record's cluster value for every attribute) from an unlinked one (``linkage: unlinked``,
docs/privacy.md "Linked and unlinked releases": every released column shuffled on its own). Two
standard multivariate measures do:

- **2-way marginal TVD**: for every pair of attributes, the total variation distance
  ½ Σ |p − q| between the original and the protected joint distribution of the pair, averaged over
  all pairs. Numeric attributes are binned into ``bins`` equal-width bins of their **declared**
  domain [lo, hi] (public, not the data's range); categorical attributes by category.
- **Correlation error**: the Frobenius norm ‖R_orig − R_prot‖_F of the difference of the Pearson
  correlation matrices over **all** attributes, categorical ones encoded by their index in the
  schema's declared category order (a fixed public encoding, the same for both tables). A protected
  column that is constant (every cluster released at one value) has no correlation; its
  off-diagonal entries count as 0.

One run protects the whole table once per (ε, k) with the release's own steps
(:func:`fragrelease.idpir.microaggregation.ir_clusters`, the mechanism registry's sensitivity and
scale, :func:`fragrelease.idpir.mechanisms.noisy_centroids`,
:func:`fragrelease.idpir.postprocess.finish_centroids`), centralized, ε/l per attribute, category
order ``dp-frequency`` (the release default, redrawn per run) unless told otherwise. Every record
gets its cluster's released value (linked table). The noise of a run is drawn once and finished
with and without the isotonic projection. The unlinked table permutes each protected column
independently; the permutations come from :func:`fragrelease.rng.laplace.evaluation_generator` (numpy
PCG64 seeded from the OS CSPRNG, evaluation only; releases use CSPRNG keys).

Run: ``python -m fragrelease.experiments.linkage --out docs/evaluation`` writes ``linkage.csv``
and ``linkage.png``.
"""
from __future__ import annotations

import argparse
import itertools
import os
import time
from fractions import Fraction
from typing import Sequence

import numpy as np
import pandas as pd

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.mechanisms import get_mechanism, noisy_centroids
from fragrelease.idpir.microaggregation import ir_centroids, ir_clusters
from fragrelease.idpir.postprocess import POSTPROCESS, finish_centroids
from fragrelease.protocol.options import ReleaseOptions
from fragrelease.rng.laplace import FAST_SAMPLER_NAME, FastLaplace, NoiseSource, evaluation_generator

from .evaluation import AttributeSpec, CategoryCounts, OrderSetting, category_order_of

LINKAGES = ("linked", "unlinked")
#: Cells of the comparison (centralized iDP-IR).
EPSILONS = ("0.5", "1")
KS = (50, 150)


def encode(values: np.ndarray, spec: AttributeSpec, bins: int = 10) -> np.ndarray:
    """Codes in [0, size) of one column for the 2-way marginals, shape (n,).

    Numeric: equal-width bins of the declared [lo, hi] (``np.digitize``; hi falls in the last bin).
    Categorical: index in the declared category order (``values`` are category labels).

    Raises
    ------
    InvalidParameterError
        bins < 1, or a label that is not a declared category (named).
    """
    if spec.categorical:
        index = {c: i for i, c in enumerate(spec.categories)}
        try:
            return np.array([index[v] for v in np.asarray(values, dtype=object)], dtype=np.int64)
        except KeyError as e:
            raise InvalidParameterError(f"value {e.args[0]!r} of {spec.name!r} is not a declared category") from None
    if bins < 1:
        raise InvalidParameterError(f"bins must be >= 1, not {bins}")
    edges = np.linspace(spec.lo, spec.hi, bins + 1)[1:-1]
    return np.digitize(np.asarray(values, float), edges).astype(np.int64)


def code_sizes(specs: Sequence[AttributeSpec], bins: int = 10) -> list[int]:
    return [len(s.categories) if s.categorical else bins for s in specs]


def marginal_tvd(original: np.ndarray, protected: np.ndarray, sizes: Sequence[int]) -> float:
    """Mean over all attribute pairs of the TVD between the original and protected 2-way marginals.

    ``original``, ``protected``: integer codes of shape (n, l) (:func:`encode`); ``sizes``: the
    number of codes of every column. TVD = ½ Σ_cells |p − q| ∈ [0, 1] with p, q the joint
    frequencies (``np.bincount`` of the pair's cell index).

    Raises
    ------
    InvalidParameterError
        Shapes differ or fewer than two columns.
    """
    if original.shape != protected.shape or original.ndim != 2 or original.shape[1] < 2:
        raise InvalidParameterError(f"code tables must have equal shapes (n, l >= 2), not {original.shape} "
                                    f"and {protected.shape}")
    n = original.shape[0]
    tvds = []
    for i, j in itertools.combinations(range(original.shape[1]), 2):
        cells = sizes[i] * sizes[j]
        p = np.bincount(original[:, i] * sizes[j] + original[:, j], minlength=cells)
        q = np.bincount(protected[:, i] * sizes[j] + protected[:, j], minlength=cells)
        tvds.append(0.5 * float(np.abs(p - q).sum()) / n)
    return float(np.mean(tvds))


def correlation_matrix(table: np.ndarray) -> np.ndarray:
    """Pearson correlation matrix of the columns of ``table`` (shape (n, l)); constant columns: 0 off the diagonal."""
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.corrcoef(np.asarray(table, float), rowvar=False)
    r = np.nan_to_num(r, nan=0.0)
    np.fill_diagonal(r, 1.0)
    return r


def correlation_error(original: np.ndarray, protected: np.ndarray) -> float:
    """‖R_orig − R_prot‖_F over all columns (:func:`correlation_matrix`)."""
    return float(np.linalg.norm(correlation_matrix(original) - correlation_matrix(protected), "fro"))


def protect_table(data: dict[str, np.ndarray], ids: np.ndarray, specs: Sequence[AttributeSpec], *, mechanism: str,
                  epsilon: str, k: int, noise: NoiseSource, category_order: OrderSetting,
                  postprocess: Sequence[str] = POSTPROCESS) -> dict[str, dict[str, np.ndarray]]:
    """The linked protected table of one centralized run, per ``postprocess`` value, on one noise draw.

    ``data`` maps attribute → values of shape (n,) (numeric, or category labels). Each attribute
    gets ε/l; a categorical attribute is ranked by ``category_order`` (``dp-frequency``: a fresh
    noisy histogram through ``noise``, the centroids get (1 − share)·ε_attr). Returns
    {postprocess: {attribute: released values of shape (n,) in the records' order}} (categorical:
    labels). The same noisy centroids are finished once per value.
    """
    mech = get_mechanism(mechanism)
    eps_attr = Fraction(epsilon) / len(specs)
    out: dict[str, dict[str, np.ndarray]] = {p: {} for p in postprocess}
    for s in specs:
        eps_c = eps_attr
        if s.categorical:
            order, eps_c = category_order_of(CategoryCounts(data[s.name], s), category_order, eps_attr, noise)
            rank = {c: i + 1 for i, c in enumerate(order)}
            values = np.array([rank[v] for v in np.asarray(data[s.name], dtype=object)], float)
        else:
            values = np.asarray(data[s.name], float)
        k_used = mech.k_used(k)
        clusters = ir_clusters(values, k_used, ids)
        centroids = ir_centroids(values, clusters)
        c = len(centroids)
        scale = mech.scale(mech.sensitivity(values, k, s.lo, s.hi), eps_c, c)
        noisy = noisy_centroids(centroids=centroids, scales=np.full(c, scale), attributes=np.full(c, s.name, dtype=object),
                                clusters=np.arange(c), noise=noise)
        sizes = np.bincount(clusters, minlength=c)
        for p in postprocess:
            z = finish_centroids(noisy, sizes, s.lo, s.hi, s.categorical, ReleaseOptions.of(postprocess=p))[clusters]
            out[p][s.name] = np.asarray(order, dtype=object)[z.astype(int) - 1] if s.categorical else z
    return out


def unlink(table: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Every column permuted independently (``rng``: the evaluation generator)."""
    return {a: v[rng.permutation(len(v))] for a, v in table.items()}


def _matrices(table: dict[str, np.ndarray], specs: Sequence[AttributeSpec], bins: int) -> tuple[np.ndarray, np.ndarray]:
    codes = np.column_stack([encode(table[s.name], s, bins) for s in specs])
    numeric = np.column_stack([codes[:, i] if s.categorical else np.asarray(table[s.name], float)
                               for i, s in enumerate(specs)])
    return codes, numeric


def evaluate_linkage(data: dict[str, np.ndarray], ids: np.ndarray, specs: Sequence[AttributeSpec], *,
                     dataset: str = "", mechanism: str = "idp-ir", epsilons: Sequence[str] = EPSILONS,
                     ks: Sequence[int] = KS, runs: int = 20, bins: int = 10,
                     category_order: OrderSetting | None = None, noise: NoiseSource | None = None,
                     rng: np.random.Generator | None = None) -> pd.DataFrame:
    """One row per (run, ε, k, postprocess, linkage) with ``marginal_tvd`` and ``correlation_error``.

    Raises
    ------
    InvalidParameterError
        runs < 1.
    """
    if runs < 1:
        raise InvalidParameterError(f"runs must be >= 1, not {runs}")
    category_order = category_order or OrderSetting.parse("dp-frequency", "0.1")
    noise = noise or FastLaplace()
    rng = rng or evaluation_generator()
    sizes = code_sizes(specs, bins)
    orig_codes, orig_numeric = _matrices(data, specs, bins)
    rows = []
    for run in range(runs):
        for eps in epsilons:
            for k in ks:
                tables = protect_table(data, ids, specs, mechanism=mechanism, epsilon=eps, k=k, noise=noise,
                                       category_order=category_order)
                for p, table in tables.items():
                    for linkage in LINKAGES:
                        t = table if linkage == "linked" else unlink(table, rng)
                        codes, numeric = _matrices(t, specs, bins)
                        rows.append({"dataset": dataset, "scenario": "centralized", "mechanism": mechanism,
                                     "epsilon": eps, "k": int(k), "postprocess": p, "linkage": linkage, "run": run,
                                     "category_order": category_order.order, "order_share": category_order.share,
                                     "marginal_tvd": marginal_tvd(orig_codes, codes, sizes),
                                     "correlation_error": correlation_error(orig_numeric, numeric)})
    return pd.DataFrame(rows)


def summarize(per_run: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation over the runs per (dataset, ε, k, postprocess, linkage)."""
    keys = ["dataset", "scenario", "mechanism", "category_order", "order_share", "epsilon", "k", "postprocess",
            "linkage"]
    g = per_run.groupby(keys, sort=False)
    out = g.agg(marginal_tvd=("marginal_tvd", "mean"), marginal_tvd_std=("marginal_tvd", "std"),
                correlation_error=("correlation_error", "mean"),
                correlation_error_std=("correlation_error", "std"), runs=("run", "count")).reset_index()
    out["sampler"] = FAST_SAMPLER_NAME
    return out


def reference_rows(data, specs, dataset: str, bins: int, rng: np.random.Generator) -> list[dict]:
    """The original table unlinked (no noise, no microaggregation): the floor of what any unlinked release loses."""
    codes, numeric = _matrices(data, specs, bins)
    t = unlink(data, rng)
    c2, n2 = _matrices(t, specs, bins)
    return [{"dataset": dataset, "scenario": "original, columns permuted", "mechanism": "none", "epsilon": "inf",
             "k": 1, "postprocess": "none", "linkage": "unlinked", "category_order": "none", "order_share": "0",
             "marginal_tvd": marginal_tvd(codes, c2, code_sizes(specs, bins)),
             "correlation_error": correlation_error(numeric, n2), "runs": 1, "sampler": FAST_SAMPLER_NAME}]


def plot_linkage(summary: pd.DataFrame, path: str) -> str:
    """Bars of both measures per dataset and (ε, k): linked/unlinked × none/isotonic."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = summary[summary["mechanism"] != "none"]
    datasets = sorted(s["dataset"].unique())
    fig, axes = plt.subplots(len(datasets), 2, figsize=(11, 3.3 * len(datasets)), squeeze=False)
    variants = [(lk, p) for lk in LINKAGES for p in ("none", "isotonic")]
    colors = {("linked", "none"): "#9ecae1", ("linked", "isotonic"): "#08519c",
              ("unlinked", "none"): "#fdae6b", ("unlinked", "isotonic"): "#a63603"}
    for i, d in enumerate(datasets):
        sd = s[s["dataset"] == d]
        cells = sorted({(e, k) for e, k in zip(sd["epsilon"], sd["k"])}, key=lambda c: (float(c[0]), c[1]))
        floor = summary[(summary["dataset"] == d) & (summary["mechanism"] == "none")]
        for j, (col, label) in enumerate((("marginal_tvd", "mean 2-way marginal TVD"),
                                          ("correlation_error", "correlation error ‖ΔR‖_F"))):
            ax = axes[i][j]
            w = 0.8 / len(variants)
            for v, (lk, p) in enumerate(variants):
                q = sd[(sd["linkage"] == lk) & (sd["postprocess"] == p)].set_index(["epsilon", "k"])
                vals = [q.loc[c, col] if c in q.index else np.nan for c in cells]
                err = [q.loc[c, col + "_std"] if c in q.index else np.nan for c in cells]
                ax.bar(np.arange(len(cells)) + (v - 1.5) * w, vals, w, yerr=err, color=colors[(lk, p)],
                       label=f"{lk}, postprocess {p}")
            if len(floor):
                ax.axhline(float(floor[col].iloc[0]), color="grey", ls="--", lw=1,
                           label="original, columns permuted")
            ax.set_xticks(range(len(cells)), [f"ε={e}\nk={k}" for e, k in cells], fontsize=8)
            ax.set_title(f"{d}: {label}\n(centralized iDP-IR, mean ± 1 std over runs; lower is better)", fontsize=9)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> dict:
    from fragrelease.schemas.datasets import BUILTIN_SCHEMAS, load_builtin_pandas

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/evaluation")
    ap.add_argument("--dataset", action="append")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--bins", type=int, default=10)
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    t0 = time.perf_counter()
    summaries = []
    rng = evaluation_generator()
    for dataset in args.dataset or ["adult", "wine"]:
        schema = BUILTIN_SCHEMAS[dataset]
        pdf = load_builtin_pandas(dataset)
        specs = [AttributeSpec.from_attribute(a) for a in schema.protected]
        data = {s.name: pdf[s.name].to_numpy(object if s.categorical else float) for s in specs}
        ids = pdf[schema.id_column].to_numpy()
        per_run = evaluate_linkage(data, ids, specs, dataset=dataset, runs=args.runs, bins=args.bins, rng=rng)
        summaries.append(summarize(per_run))
        summaries.append(pd.DataFrame(reference_rows(data, specs, dataset, args.bins, rng)))
    summary = pd.concat(summaries, ignore_index=True)
    path = os.path.join(args.out, "linkage.csv")
    summary.to_csv(path, index=False)
    fig = plot_linkage(summary, os.path.join(args.out, "linkage.png"))
    seconds = time.perf_counter() - t0
    print(f"linkage: {len(summary)} rows in {seconds:.1f} s -> {path}, {fig}")
    return {"csv": path, "figure": fig, "seconds": seconds}


if __name__ == "__main__":
    main()
