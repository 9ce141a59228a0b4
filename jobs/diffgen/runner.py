"""DiffGen releases on Spark (docs/specification.md §7): marginals, leaf counts and noise as Spark aggregations.

Steps of :func:`run_diffgen_release`:

1. per predictor, ``groupBy(attribute, class).count()`` (an aggregate, collected to the driver);
2. the specialization process on those marginals (:func:`fragrelease.diffgen.engine.specialize_cut`,
   CSPRNG randomness), giving the public cut;
3. every record's leaf (cell code per attribute, a pandas UDF) and ``groupBy(cells, class).count()``;
4. the full leaf × class grid (``crossJoin`` of the cut cells, so empty leaves are present), left-joined
   with the counts, plus Lap(2/ε) from a non-deterministic pandas UDF (OpenDP), materialized with
   ``localCheckpoint`` before it is written, so a retry never redraws;
5. the generalized table committed as a Delta table (``<output>/generalized``), then the synthetic
   microdata generated from it (``<output>/synthetic``): ``k = max(0, floor(noisy + 0.5))`` records per
   leaf, none where ``k`` is below the sparse-domain threshold (:func:`fragrelease.diffgen.release.sparse_min_count`
   by default; ``synthetic_min_count=1`` for the plain expansion), values drawn uniformly inside each
   cell (:func:`fragrelease.diffgen.release.synthesize_cells`).

Output columns. ``generalized``: one string column per predictor (the cut value's label), ``income``
(class), ``noisy_count`` (double). ``synthetic``: one column per predictor (integer for numeric,
string for categorical) and ``income``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from fragrelease.diffgen.engine import Cut, specialize_cut
from fragrelease.diffgen.params import DiffGenParams, DiffGenResult, TwoPartyParams
from fragrelease.diffgen.predictors import NumericDomain
from fragrelease.diffgen.release import (
    leaf_count_noise,
    sparse_min_count,
    sparse_min_count_two_laplace,
)
from fragrelease.diffgen.share_noise import SELECTION_SAMPLER_CAVEAT
from fragrelease.errors import InvalidParameterError, ProtocolError
from fragrelease.schemas.taxonomies import ADULT_CLASS, ADULT_CLASS_VALUES, ADULT_PREDICTORS, adult_predictors

from .marginals import _col, marginal_counts_spark

#: Default refusal threshold for the number of leaf × class cells (each becomes a row).
MAX_LEAVES = 5_000_000
def _cell_udf(cut: Cut, attr: str):
    from pyspark.sql.functions import pandas_udf

    @pandas_udf("long")  # type: ignore[call-overload]  # pyspark's stubs lack the type-hint form
    def cell(values: pd.Series) -> pd.Series:
        return pd.Series(cut.cell_codes(attr, values.to_numpy()))

    return cell


def leaf_grid(spark, cut: Cut, class_values: Sequence[str]):
    """Every leaf × class cell as rows of cell codes (``c_<attr>`` longs, ``income``): a crossJoin."""
    grid = spark.createDataFrame(pd.DataFrame({ADULT_CLASS: list(class_values)}))
    for a in cut.attributes:
        grid = grid.crossJoin(spark.range(cut.size(a)).withColumnRenamed("id", _col(a)))
    return grid


def noisy_generalized_table(spark, df, cut: Cut, epsilon: Fraction, class_values: Sequence[str] = ADULT_CLASS_VALUES,
                            max_leaves: int = MAX_LEAVES):
    """Leaf × class counts + Lap(2/ε) for every cell of ``cut`` (empty leaves included), materialized.

    Columns out: ``c_<attr>`` (cell codes), ``income``, ``noisy_count`` (double).

    Raises
    ------
    InvalidParameterError
        More cells than ``max_leaves``.
    """
    from pyspark.sql import functions as F

    from fragrelease.udfs.noise import laplace_count_udf

    n_cells = math.prod(cut.size(a) for a in cut.attributes) * len(class_values)
    if n_cells > max_leaves:
        raise InvalidParameterError(f"the cut has {n_cells} leaf x class cells, more than max_leaves = {max_leaves}")
    coded = df.select(F.col(ADULT_CLASS), *[_cell_udf(cut, a)(F.col(f"`{a}`")).alias(_col(a)) for a in cut.attributes])
    keys = [ADULT_CLASS] + [_col(a) for a in cut.attributes]
    counts = coded.groupBy(*keys).count()
    full = leaf_grid(spark, cut, class_values).join(counts, on=keys, how="left").fillna(0, subset=["count"])
    noisy = full.withColumn("noisy_count", laplace_count_udf(leaf_count_noise(epsilon))(F.col("count").cast("double")))
    return noisy.drop("count").localCheckpoint(eager=True)


def _labelled(spark, noisy, cut: Cut):
    """Replace cell codes by the cut's public labels (small lookup joins)."""
    from pyspark.sql import functions as F

    out = noisy
    for a in cut.attributes:
        lab = spark.createDataFrame(pd.DataFrame({_col(a): np.arange(cut.size(a), dtype=np.int64),
                                                  a: cut.labels(a)}))
        out = out.join(F.broadcast(lab), on=_col(a), how="left")
    return out.select(*[F.col(f"`{a}`") for a in cut.attributes], ADULT_CLASS, "noisy_count")


def resolve_min_count(spec, n_cells: int, epsilon: Fraction, laplace_terms: int = 1) -> int:
    """The synthetic expansion's threshold from a user's setting: ``"auto"`` or an integer ≥ 1.

    ``"auto"``: :func:`fragrelease.diffgen.release.sparse_min_count` when each count carries one Lap(2/ε)
    (``laplace_terms=1``: DiffGen, two-party ``gaussian-squares``), :func:`sparse_min_count_two_laplace`
    when it carries two (``laplace_terms=2``: two-party ``laplace-each``).

    Raises
    ------
    InvalidParameterError
        Anything else, naming the value; ``laplace_terms`` not 1 or 2.
    """
    if laplace_terms not in (1, 2):
        raise InvalidParameterError(f"laplace_terms must be 1 or 2, not {laplace_terms!r}")
    if isinstance(spec, str) and spec.strip().lower() == "auto":
        if laplace_terms == 2:
            return sparse_min_count_two_laplace(n_cells, epsilon)
        return sparse_min_count(n_cells, epsilon)
    try:
        t = int(str(spec).strip())
    except ValueError:
        t = 0
    if t < 1 or str(t) != str(spec).strip():
        raise InvalidParameterError(f"synthetic min count must be 'auto' or an integer >= 1, not {spec!r}")
    return t


def synthetic_table(noisy, cut: Cut, min_count: int = 1):
    """Synthetic microdata from the materialized noisy table (post-processing; no privacy cost).

    Columns in: ``c_<attr>`` cell codes, ``income``, ``noisy_count``. Columns out: one per predictor
    (long for numeric, string for categorical) and ``income``. A leaf yields
    ``k = max(0, floor(noisy_count + 0.5))`` records if ``k >= min_count`` (see
    :func:`fragrelease.diffgen.release.release_counts`), none otherwise; values are drawn inside each cell.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    k = F.greatest(F.floor(F.col("noisy_count") + F.lit(0.5)), F.lit(0)).cast("int")
    rows = noisy.withColumn("k", k).filter((F.col("k") > 0) & (F.col("k") >= F.lit(int(min_count))))
    rows = rows.withColumn("i", F.explode(F.sequence(F.lit(1), F.col("k")))).drop("i", "k", "noisy_count")
    fields = [StructField(a, LongType() if isinstance(cut.predictors[a], NumericDomain) else StringType())
              for a in cut.attributes] + [StructField(ADULT_CLASS, StringType())]
    schema = StructType(fields)

    from fragrelease.udfs.diffgen import cell_values_fn

    # post-processing of released counts (not privacy-relevant): values drawn inside the cells on the executors
    return rows.mapInPandas(cell_values_fn(cut, {a: _col(a) for a in cut.attributes}, ADULT_CLASS), schema)


def run_diffgen_release(spark, params: DiffGenParams) -> DiffGenResult:
    """Single-party DiffGen release of the built-in Adult table (all 45,222 records) to Delta.

    ``params`` (:class:`fragrelease.diffgen.params.DiffGenParams`): ε, h, the score, the output
    folder, the predictors (None: all of Adult's), ``if_exists``, ``max_leaves`` and
    ``synthetic_min_count`` (``"auto"`` or an integer ≥ 1, :func:`resolve_min_count`).
    Returns a :class:`~fragrelease.diffgen.params.DiffGenResult`: paths, versions, cut labels, ε ledger, rows, seconds.

    Raises
    ------
    InvalidParameterError
        Bad ε, h, score or synthetic min count, or a cut with more than ``max_leaves`` cells.
    """
    from fragrelease.budget import parse_epsilon
    from fragrelease.rng.diffgen import SecureDiffGenRandomness
    from fragrelease.schemas.datasets import load_builtin

    t0 = time.perf_counter()
    eps = parse_epsilon(params.epsilon)
    attributes = list(params.attributes) if params.attributes is not None else list(ADULT_PREDICTORS)
    preds = adult_predictors(attributes)
    df = load_builtin(spark, "adult").select("record_id", ADULT_CLASS, *attributes)
    counts = marginal_counts_spark(df, preds, ADULT_CLASS, ADULT_CLASS_VALUES)
    cut, ledger = specialize_cut(preds, counts, epsilon=eps, specializations=params.specializations,
                                 score=params.score, randomness=SecureDiffGenRandomness())
    noisy = noisy_generalized_table(spark, df, cut, eps, max_leaves=params.max_leaves)
    ledger_rows = [{"step": s.step, "attribute": s.attribute, "epsilon": str(s.epsilon),
                    "composition": s.composition} for s in ledger]
    ledger_rows.append({"step": "Laplace noise on leaf counts", "attribute": "leaves", "epsilon": str(eps / 2),
                        "composition": "sequential"})
    spent = sum((Fraction(r["epsilon"]) for r in ledger_rows), Fraction(0))
    return write_release(spark, noisy, cut, ReleaseWrite(
        output=params.output, epsilon=eps, specializations=params.specializations, score=params.score,
        ledger=tuple(ledger_rows), spent=spent, mode="diffgen", if_exists=params.if_exists, t0=t0,
        synthetic_min_count=params.synthetic_min_count))


def diffgen_guarantee(epsilon) -> str:
    """What a single-party DiffGen release states: ε-DP for add/remove neighbours (public ε).

    Mohammed et al. (KDD 2011), docs/specification.md §7: the specialization spends at most ε/2, the
    leaf counts ε/2; under substitution of one record the guarantee is 2ε. The selections' sampler
    is not exact (:data:`fragrelease.diffgen.share_noise.SELECTION_SAMPLER_CAVEAT`).
    """
    return (f"epsilon-DP (epsilon = {epsilon}) for neighbouring tables that differ by adding or removing one "
            "record (DiffGen: at most epsilon/2 for the generalization, epsilon/2 for the leaf counts); "
            f"2*epsilon under substitution; {SELECTION_SAMPLER_CAVEAT}")


@dataclass(frozen=True)
class ReleaseWrite:
    """What :func:`write_release` commits besides the noisy table and the cut (public facts only).

    ``output``: the release folder; ``epsilon``, ``specializations``, ``score``: the release's ε, h
    and score; ``ledger``: the ε spends (step, attribute, epsilon, composition) and ``spent`` their
    sum; ``mode``: ``diffgen`` or ``distdiffgen``; ``if_exists``: ``error`` or ``new-version``;
    ``t0``: the release's start (``time.perf_counter``); ``extra``: more provenance (the two-party
    facts, and its ``guarantee``); ``synthetic_min_count``: ``"auto"`` or an integer ≥ 1;
    ``laplace_terms``: independent Lap(2/ε) terms in each released count (2 for ``laplace-each``).
    """

    output: str
    epsilon: Fraction
    specializations: int
    score: str
    ledger: tuple[Mapping[str, Any], ...]
    spent: Fraction
    mode: str
    if_exists: str
    t0: float
    extra: Mapping[str, Any] = field(default_factory=dict)
    synthetic_min_count: Any = "auto"
    laplace_terms: int = 1


def write_release(spark, noisy, cut: Cut, spec: ReleaseWrite) -> DiffGenResult:
    """Commit the generalized table and the synthetic microdata as two Delta tables under ``spec.output``.

    The generalized table holds every leaf × class cell; the synthetic table is expanded from it with
    the threshold :func:`resolve_min_count` gives (recorded in its provenance; it depends only on the
    cut size, ε and ``spec.laplace_terms``, the number of independent Lap(2/ε) terms in each released count:
    2 for the two-party ``laplace-each`` noise). Both are materialized and checked (existing table under
    ``if_exists="error"``, schema under ``"new-version"``) before the first commit, through
    :func:`fragrelease.jobs.storage.commit_release` (the one commit and provenance contract).

    Raises
    ------
    ReleaseExistsError, SchemaMismatchError
        From :func:`fragrelease.jobs.storage.check_commit`, before anything is written.
    InvalidParameterError
        A bad synthetic min count.
    """
    import posixpath

    from fragrelease.rng.diffgen import SecureDiffGenRandomness

    from ..storage import check_commit, commit_release

    output, epsilon, if_exists, synthetic_min_count = spec.output, spec.epsilon, spec.if_exists, spec.synthetic_min_count
    ledger = [dict(r) for r in spec.ledger]
    prov = {"algorithm": spec.mode, "epsilon": str(epsilon), "specializations": spec.specializations,
            "score": spec.score, "epsilon_spent": str(spec.spent), "neighbours": "add/remove one record",
            "ledger": ledger, "cut": cut.to_public(), "sampler": SecureDiffGenRandomness.name, **spec.extra}
    n_cells = math.prod(cut.size(a) for a in cut.attributes) * len(ADULT_CLASS_VALUES)
    min_count = resolve_min_count(synthetic_min_count, n_cells, epsilon, spec.laplace_terms)
    gen_path = posixpath.join(output, "generalized")
    syn_path = posixpath.join(output, "synthetic")
    # both tables are computed and checked before the first commit, so a failure or refusal writes nothing
    generalized = _labelled(spark, noisy, cut).localCheckpoint(eager=True)
    syn = synthetic_table(noisy, cut, min_count).localCheckpoint(eager=True)
    for df, path in ((generalized, gen_path), (syn, syn_path)):
        check_commit(df, path, if_exists)
    # the two-party release states its share-noise guarantee; single-party DiffGen its ε (public)
    guarantee = prov.get("guarantee") or diffgen_guarantee(epsilon)
    _, v1 = commit_release(generalized, system="diffgen", provenance=prov, guarantee=guarantee, path=gen_path,
                           if_exists=if_exists)
    if str(synthetic_min_count).strip().lower() != "auto":
        rule = "user setting"
    elif spec.laplace_terms == 2:
        rule = ("sparse-domain filter for Lap(2/epsilon) + Lap(2/epsilon): smallest t with "
                "exp(-(t-1/2)/b)(1 + (t-1/2)/(2b))/2 <= 1/cells, b = 2/epsilon")
    else:
        rule = "sparse-domain filter ceil(2/epsilon * ln(cells/2) + 1/2)"
    _, v2 = commit_release(syn, system="diffgen", guarantee=guarantee, path=syn_path, if_exists=if_exists,
                           provenance={**prov, "table": "synthetic microdata from " + gen_path,
                                       "synthetic_min_count": min_count, "synthetic_min_count_rule": rule})
    return DiffGenResult(generalized=gen_path, synthetic=syn_path, versions=(v1, v2), cells=n_cells,
                         synthetic_min_count=min_count, synthetic_rows=syn.count(),
                         cut={a: cut.labels(a) for a in cut.attributes}, ledger=tuple(ledger), spent=spec.spent,
                         seconds=time.perf_counter() - spec.t0)


def noisy_from_array(spark, cut: Cut, noisy_counts: np.ndarray, class_values: Sequence[str] = ADULT_CLASS_VALUES):
    """The two-party result (an aggregate array shaped (cut sizes..., |classes|)) as a noisy table DataFrame."""
    idx = np.indices(noisy_counts.shape).reshape(noisy_counts.ndim, -1)
    pdf = pd.DataFrame({_col(a): idx[i].astype(np.int64) for i, a in enumerate(cut.attributes)})
    pdf[ADULT_CLASS] = np.asarray(class_values)[idx[-1]]
    pdf["noisy_count"] = noisy_counts.ravel().astype(float)
    return spark.createDataFrame(pdf).localCheckpoint(eager=True)


def cut_from_labels(labels: Mapping[str, list[str]]) -> Cut:
    """Rebuild a :class:`Cut` from released labels (numeric boundaries parsed from the exact labels)."""
    cut = Cut.top(adult_predictors(list(labels)))
    for a, labs in labels.items():
        p = cut.predictors[a]
        if isinstance(p, NumericDomain):
            cut.bounds[a] = [float(x.strip("[").split(",")[0]) for x in labs] + [float(p.hi)]
        else:
            cut.nodes[a] = list(labs)
    return cut


def run_two_party_release(spark, params: TwoPartyParams) -> DiffGenResult:
    """DistDiffGen on Adult with two party processes, then the release written with Spark to Delta.

    ``spark`` may be a SparkSession or a zero-argument callable returning one; the callable is
    called only after the parties finish (so three JVMs never run at once). ``params``
    (:class:`fragrelease.diffgen.params.TwoPartyParams`): each party's attributes, ε, h, score,
    output, key size, rows, ``if_exists``, ``backend`` (``"spark"`` gives each party its own
    SparkSession on ``party_master``), ``synthetic_min_count`` and ``noise``, the share-noise mode
    (:data:`fragrelease.diffgen.share_noise.NOISE_MODES`): ``"laplace-each"`` (default; ε-DP against
    the public and against the other party) or ``"gaussian-squares"`` (opt-in; ε-DP against the
    public, **not DP against the other party**). The provenance records the mode that ran
    (``share_noise``) and both guarantees (``guarantee``,
    :func:`fragrelease.diffgen.share_noise.share_noise_guarantee`); the returned
    :class:`~fragrelease.diffgen.params.DiffGenResult` carries them too.

    Raises
    ------
    InvalidParameterError, ProtocolError
        A bad parameter or noise mode, or a failed party process; see :func:`fragrelease.jobs.diffgen.processes.run_adult_two_party`.
    """
    from fragrelease.budget import parse_epsilon
    from fragrelease.diffgen.share_noise import share_noise_guarantee

    from .processes import run_adult_two_party

    t0 = time.perf_counter()
    eps = parse_epsilon(params.epsilon)
    noise = params.noise
    r_h, r_i = run_adult_two_party(params.hospital_attributes, params.insurer_attributes, params.protocol(eps),
                                   rows=params.rows, backend=params.backend, master=params.party_master)
    if callable(spark):
        spark = spark()
    if r_h.noise != noise or r_i.noise != noise:
        raise ProtocolError(f"share noise {noise!r} was asked for, the parties ran {r_h.noise!r} and {r_i.noise!r}")
    guarantee = share_noise_guarantee(r_h.noise, eps)
    cut = cut_from_labels(r_h.cut_labels)
    noisy = noisy_from_array(spark, cut, r_h.noisy_counts)
    ledger = [{"step": s.step, "attribute": s.attribute, "epsilon": str(s.epsilon), "composition": s.composition}
              for s in r_h.ledger]
    cost = {"hospital": {**r_h.channel, "seconds": r_h.seconds}, "insurer": {**r_i.channel, "seconds": r_i.seconds}}
    out = write_release(spark, noisy, cut, ReleaseWrite(
        output=params.output, epsilon=eps, specializations=params.specializations, score=params.score,
        ledger=tuple(ledger), spent=r_h.spent(), mode="distdiffgen", if_exists=params.if_exists, t0=t0,
        extra={"parties": {"hospital": list(params.hospital_attributes), "insurer": list(params.insurer_attributes)},
               "paillier_key_bits": params.key_bits, "share_noise": r_h.noise, "guarantee": guarantee,
               # message counts are fixed by h; bytes and seconds grow with n, so they are
               # reported to the operator only, never written into the release
               "protocol_messages": {p: {k: v for k, v in c.items() if k.endswith("_messages")}
                                     for p, c in cost.items()}},
        synthetic_min_count=params.synthetic_min_count,
        laplace_terms=2 if r_h.noise == "laplace-each" else 1))
    return replace(out, protocol_cost=cost, winners=tuple(r_h.winners), share_noise=r_h.noise, guarantee=guarantee)
