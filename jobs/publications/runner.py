"""Independent publications of overlapping people on Spark (docs/specification.md §5 and §8; Baig et al. (CIKM 2011)).

- :func:`anonymize_publications` anonymizes each publisher's table independently (publishers never
  see each other's data): Mondrian ℓ-diverse generalization (the baseline) or δ-cloning by
  micro-statistics, one ``groupBy(publisher).applyInPandas`` group per publisher, running the
  Spark-free algorithms of :mod:`fragrelease.publications.mondrian` and :mod:`fragrelease.publications.cloning`.
- :func:`cloning_report` measures what a cloned release achieved (distorted tuples, the adaptive
  per-value bound δ) from Spark aggregates of the input and the release.
- :func:`composition_audit` runs the composition attack of :mod:`fragrelease.publications.composition` on two or
  more releases with DataFrame expressions only (joins on the person key, SQL higher-order functions
  on the classes' sensitive multisets), so it scales with the cluster.
- :func:`run_anonymize` / :func:`run_audit` read the inputs, commit the outputs with
  :func:`fragrelease.jobs.storage.commit_release` and are what the CLI (``fragrelease publications``)
  calls (spark-submit runs the same through :func:`fragrelease.jobs.cli.main`).
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

import pandas as pd

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

from fragrelease.errors import ConfigError, InvalidParameterError, SchemaMismatchError
from fragrelease.publications.composition import CONFIDENCE_BINS, release_layout
from fragrelease.publications.params import (
    AnonymizeParams,
    AnonymizeResult,
    AuditParams,
    AuditResult,
    AuditSummary,
)
from fragrelease.taxonomy import QuasiIdentifier, check_positive_int
from fragrelease.udfs.publications import anonymize_publisher

from ..frames import aggregate_row

METHODS = ("mondrian", "cloning")
_GROUP = "__publisher"


def _release_schema(df, qis: Sequence[QuasiIdentifier], sensitive: str, method: str, keep: Sequence[str],
                    publisher: Optional[str]):
    from pyspark.sql import types as T

    fields = []
    if publisher:
        fields.append(T.StructField(publisher, df.schema[publisher].dataType, False))
    fields.append(T.StructField("eq_class", T.LongType(), False))
    if method == "cloning":
        fields.append(T.StructField("sub_class", T.LongType(), False))
    for q in qis:
        if q.kind == "numeric":
            names = ("_avg", "_lo", "_hi") if method == "cloning" else ("_lo", "_hi")
            fields += [T.StructField(f"{q.name}{s}", T.DoubleType(), False) for s in names]
        else:
            fields.append(T.StructField(q.name, T.StringType(), False))
            if method == "cloning":
                fields.append(T.StructField(f"{q.name}_distinct", T.LongType(), False))
    if method == "cloning":
        fields.append(T.StructField(f"{sensitive}_values", T.ArrayType(T.StringType(), False), False))
        fields.append(T.StructField(f"{sensitive}_counts", T.ArrayType(T.LongType(), False), False))
    else:
        fields.append(T.StructField(sensitive, T.StringType(), False))
    for c in keep:
        fields.append(T.StructField(c, df.schema[c].dataType, True))
    return T.StructType(fields)


def _check_columns(df, cols: Sequence[str], what: str) -> None:
    for c in cols:
        if c not in df.columns:
            raise SchemaMismatchError(f"{what} column {c!r} is missing; columns are {df.columns}")


def anonymize_publications(df, *, method: str, qis: Sequence[QuasiIdentifier], sensitive: str, k: int,
                           l: int = 2, mu: float = 0.2, eta: int = 1, publisher: Optional[str] = "publisher",
                           keep: Sequence[str] = ()):
    """Each publisher's rows anonymized independently; one output row per published input row.

    Parameters
    ----------
    df : Spark DataFrame with the QI columns, ``sensitive`` and (unless ``publisher`` is None) a
        publisher column; one group per publisher value.
    method : ``"mondrian"`` (k-anonymous, distinct ℓ-diverse; columns of
        :func:`fragrelease.publications.mondrian.mondrian_anonymize`) or ``"cloning"`` (columns of
        :func:`fragrelease.publications.cloning.cloning_anonymize`).
    k, l, mu, eta : see those functions (ℓ is Mondrian's, μ and η cloning's).
    keep : extra columns to carry (an audit key); ids are not kept unless asked.

    Returns
    -------
    A lazy DataFrame (the cloning one is random: :func:`run_anonymize` materializes it once).

    Raises
    ------
    ConfigError, SchemaMismatchError, InvalidParameterError
        Unknown method (named), missing columns, bad k/ℓ/μ/η. Errors inside a publisher's group
        (a value outside a taxonomy, a publisher with fewer than k rows) surface when the job runs.
    """
    from pyspark.sql import functions as F

    if method not in METHODS:
        raise ConfigError(f"method must be one of {METHODS}, not {method!r}")
    k = check_positive_int("k", k)
    l = check_positive_int("l", l)
    eta = check_positive_int("eta", eta)
    if method == "cloning" and eta > k:
        raise InvalidParameterError(f"eta must be <= k = {k}, not {eta}")
    if not (0 < mu <= 1):
        raise InvalidParameterError(f"mu must be a fraction of the data in (0, 1], not {mu!r}")
    _check_columns(df, [q.name for q in qis], "quasi-identifier")
    _check_columns(df, [sensitive], "sensitive")
    _check_columns(df, list(keep), "kept")
    if publisher:
        _check_columns(df, [publisher], "publisher")
    schema = _release_schema(df, qis, sensitive, method, keep, publisher)
    qis = list(qis)
    keep = list(keep)
    cols = [q.name for q in qis] + [sensitive] + keep
    data = df.select(*(cols + ([publisher] if publisher else [])))
    data = data.withColumn(sensitive, F.col(sensitive).cast("string"))
    group = publisher or _GROUP
    if not publisher:
        data = data.withColumn(_GROUP, F.lit(0))
    out_cols = [f.name for f in schema.fields]

    def one_publisher(pdf: pd.DataFrame) -> pd.DataFrame:
        res = anonymize_publisher(pdf, method, qis, sensitive, k=k, l=l, mu=mu, eta=eta, keep=keep)
        if publisher:
            res.insert(0, publisher, pdf[publisher].iloc[0])
        return res[out_cols]

    return data.groupBy(group).applyInPandas(one_publisher, schema=schema)


def cloning_report(source, release, *, sensitive: str, publisher: Optional[str] = "publisher") -> pd.DataFrame:
    """Per publisher: records, published, distorted (suppressed + counterfeit) tuples and δ.

    Computed from Spark aggregates only: |W_j| from the input, c_j·b from the release's class
    multisets (every class of one publisher lists c_j·(merged classes) of value s_j), so
    counterfeit_j = max(c_j·b - |W_j|, 0), suppressed_j = max(|W_j| - c_j·b, 0), and
    ``δ = max_E max_s |f_P(s) - f_E(s)|`` (docs/specification.md §5; Baig et al. (CIKM 2011)
    Definition 4). Data-dependent:
    for the publisher, not for table properties.

    Returns a pandas DataFrame with ``publisher, records, published, suppressed, counterfeit,
    distorted_fraction, delta``.
    """
    from pyspark.sql import functions as F

    pub = F.col(publisher) if publisher else F.lit("release")
    sizes = source.groupBy(pub.alias("publisher"), F.col(sensitive).cast("string").alias("value")).count()
    classes = (release.select(pub.alias("publisher"), "eq_class", f"{sensitive}_values", f"{sensitive}_counts")
               .dropDuplicates(["publisher", "eq_class"]))
    per_value = classes.select("publisher", "eq_class", F.explode(F.arrays_zip(
        F.col(f"{sensitive}_values").alias("value"), F.col(f"{sensitive}_counts").alias("count"))).alias("z")) \
        .select("publisher", "eq_class", F.col("z.value").alias("value"), F.col("z.count").alias("m"))
    class_tot = per_value.groupBy("publisher", "eq_class").agg(F.sum("m").alias("class_total"))
    totals = sizes.groupBy("publisher").agg(F.sum("count").alias("records"))
    assigned = per_value.groupBy("publisher", "value").agg(F.sum("m").alias("cb"))
    dist = (sizes.join(assigned, ["publisher", "value"], "full")
            .select("publisher", F.coalesce("count", F.lit(0)).alias("w"), F.coalesce("cb", F.lit(0)).alias("cb"))
            .groupBy("publisher").agg(F.sum(F.greatest(F.col("w") - F.col("cb"), F.lit(0))).alias("suppressed"),
                                      F.sum(F.greatest(F.col("cb") - F.col("w"), F.lit(0))).alias("counterfeit")))
    # δ over every (class, value of the publisher), values absent from a class count with f_E = 0
    fp = sizes.join(totals, "publisher").select("publisher", "value", (F.col("count") / F.col("records")).alias("fp"))
    grid = class_tot.join(fp, "publisher").join(per_value, ["publisher", "eq_class", "value"], "left")
    delta = grid.groupBy("publisher").agg(F.max(F.abs(F.col("fp") - F.coalesce("m", F.lit(0)) / F.col("class_total")))
                                          .alias("delta"))
    published = release.groupBy(pub.alias("publisher")).count().withColumnRenamed("count", "published")
    rep = totals.join(published, "publisher").join(dist, "publisher").join(delta, "publisher")
    pdf = rep.toPandas()  # one aggregate row per publisher
    pdf["distorted_fraction"] = (pdf["suppressed"] + pdf["counterfeit"]) / pdf["records"]
    return pdf.sort_values("publisher").reset_index(drop=True)[
        ["publisher", "records", "published", "suppressed", "counterfeit", "distorted_fraction", "delta"]]


# ----------------------------------------------------------------------------- audit
def _candidates(rows, counterfeit_bound: Optional[int]):
    """Replace ``ms`` by the class's candidates ``{value: hi}`` and ``total`` by their sum.

    The same arithmetic as :func:`fragrelease.publications.composition.class_candidates`, as SQL higher-order
    functions on each row's class map: d = total − n_rows, t = min count, cap_s = 0 when d = 0 or
    m_s ≤ t, else min(m_s, d, bound·t); L_s = m_s − cap_s; hi_s = min(m_s, n − (ΣL − L_s)); keep
    hi_s ≥ 1. A class with ΣL > n (more counterfeits than the bound allows) fails the job, naming
    the class id.
    """
    from pyspark.sql import functions as F

    d = F.col("total") - F.col("n_rows")
    t = F.array_min(F.map_values("ms"))

    def cap(v):
        lim = v if counterfeit_bound is None else F.lit(int(counterfeit_bound)) * t
        return F.when((d == 0) | (v <= t), F.lit(0).cast("long")).otherwise(F.least(v, d, lim).cast("long"))

    rows = rows.withColumn("__low", F.aggregate(F.map_values(F.transform_values("ms", lambda k, v: v - cap(v))),
                                                F.lit(0).cast("long"), lambda a, x: a + x))
    bad = (F.col("__low") > F.col("n_rows")) | (F.col("total") < F.col("n_rows"))
    hi = F.transform_values("ms", lambda k, v: F.least(v, F.col("n_rows") - (F.col("__low") - (v - cap(v)))))
    rows = rows.withColumn("ms", F.when(bad, F.raise_error(F.concat(
        F.lit("class "), F.col("eq_class").cast("string"), F.lit(" of release "), F.col("__release"),
        F.lit(" holds more counterfeits than the counterfeit bound allows; audit releases of older versions "
              "with counterfeit_bound=None")))).otherwise(F.map_filter(hi, lambda k, v: v >= 1)))
    return rows.withColumn("total", F.aggregate(F.map_values("ms"), F.lit(0).cast("long"), lambda a, x: a + x)) \
        .drop("__low", "n_rows")


def _normalized(df, name: str, *, person: str, sensitive: str, publisher: Optional[str],
                qis: Sequence[QuasiIdentifier], counterfeit_bound: Optional[int] = 1):
    """(release, person, eq_class, ms map<string,long> of candidates, total, rt, rn, region) of one table."""
    from pyspark.sql import functions as F

    _check_columns(df, [person], "person")
    layout = release_layout(df.columns, sensitive)
    rel = F.concat(F.lit(f"{name}:"), F.col(publisher).cast("string")) if publisher and publisher in df.columns \
        else F.lit(name)
    df = df.withColumn("__release", rel)
    if layout == "generalized":
        counts = (df.groupBy("__release", "eq_class", F.col(sensitive).cast("string").alias("v")).count()
                  .groupBy("__release", "eq_class")
                  .agg(F.map_from_entries(F.array_sort(F.collect_list(F.struct("v", "count")))).alias("ms")))
        rows = df.join(counts, ["__release", "eq_class"])
    else:
        rows = df.withColumn("ms", F.map_from_arrays(F.col(f"{sensitive}_values"),
                                                     F.col(f"{sensitive}_counts").cast("array<long>")))
    rows = rows.withColumn("total", F.aggregate(F.map_values("ms"), F.lit(0).cast("long"), lambda a, x: a + x))
    # the release's whole published multiset (the adversary's prior, pooled per pair)
    classes = rows.select("__release", "eq_class", "ms").dropDuplicates(["__release", "eq_class"])
    rows = rows.join(df.groupBy("__release", "eq_class").agg(F.count(F.lit(1)).alias("n_rows")),
                     ["__release", "eq_class"])
    rows = _candidates(rows, counterfeit_bound)
    totals = (classes.select("__release", F.explode("ms").alias("v", "c")).groupBy("__release", "v")
              .agg(F.sum("c").alias("c")).groupBy("__release")
              .agg(F.map_from_entries(F.collect_list(F.struct("v", "c"))).alias("rt"), F.sum("c").alias("rn")))
    rows = rows.join(F.broadcast(totals), "__release")
    region = []
    for q in qis:
        if q.kind == "numeric":
            for s in ("_lo", "_hi"):
                c = f"{q.name}{s}"
                ok = layout == "generalized" and c in df.columns
                region.append((F.col(c).cast("double") if ok else F.lit(None).cast("double")).alias(c))
        else:
            ok = layout == "generalized" and q.name in df.columns
            region.append((F.col(q.name).cast("string") if ok else F.lit(None).cast("string")).alias(q.name))
    return rows.select(F.col("__release").alias("release"), F.col(person).alias("person"),
                       F.col("eq_class").cast("long").alias("eq_class"), "ms", "total", "rt", "rn", *region)


def _leafset_map(q: QuasiIdentifier):
    from pyspark.sql import functions as F

    t = q.taxonomy
    assert t is not None, "only a hierarchical quasi-identifier has a leaf-set map"
    kv = []
    for i, node in enumerate(t.nodes):
        kv += [F.lit(node), F.array(*[F.lit(t.nodes[j]) for j in range(t.n_leaves) if t.member[i, j]])]
    return F.create_map(*kv)


def composition_audit(releases: dict, *, person: str, sensitive: str, publisher: Optional[str] = "publisher",
                      qis: Sequence[QuasiIdentifier] = (), counterfeit_bound: Optional[int] = 1):
    """The composition attack on every person present in two releases (every pair of releases).

    Parameters
    ----------
    releases : name → Spark DataFrame, each a release in one of the layouts of
        :mod:`fragrelease.publications.composition` with the audit key column ``person``. A table with a
        ``publisher`` column holds one release per publisher (named ``<name>:<publisher>``).
    sensitive : the sensitive attribute.
    qis : quasi-identifiers whose generalizations are intersected for the report (numeric
        ``<a>_lo``/``<a>_hi`` ranges, categorical taxonomy values; generalized layouts only).
    counterfeit_bound : the public bound on counterfeits of one value per clone class
        (:func:`fragrelease.publications.composition.counterfeit_caps`; 1 for this version's cloning, None for
        releases of older versions). A class's candidates are the values that can hold a real
        row, exactly as in :func:`fragrelease.publications.composition.audit_pair`.

    Returns
    -------
    ``pairs``: one row per (pair of releases, overlapping person): ``release_a``, ``release_b``,
    ``person``, ``remaining`` (int), ``top_value``, ``confidence`` (double in [0, 1]), ``risky``
    (bool) and the intersected region (``<a>_lo``/``<a>_hi``, categorical ``<a>``; null where a
    release gives no region or the generalizations are disjoint). Lazy.

    Raises
    ------
    SchemaMismatchError
        Fewer than two releases, a missing person/sensitive column (named).
    """
    from pyspark.sql import functions as F

    if len(releases) < 2 and not publisher:
        raise SchemaMismatchError(f"the audit needs at least two releases, not {len(releases)}")
    norm: Optional[DataFrame] = None
    for name, df in releases.items():
        n = _normalized(df, name, person=person, sensitive=sensitive, publisher=publisher, qis=qis,
                        counterfeit_bound=counterfeit_bound)
        norm = n if norm is None else norm.unionByName(n)
    assert norm is not None  # at least one release (checked above)
    a, b = norm.alias("a"), norm.alias("b")
    joined = a.join(b, (F.col("a.person") == F.col("b.person")) & (F.col("a.release") < F.col("b.release")))
    rem = F.array_sort(F.array_intersect(F.map_keys("a.ms"), F.map_keys("b.ms")))
    out = joined.select(
        F.col("a.release").alias("release_a"), F.col("b.release").alias("release_b"), F.col("a.person").alias("person"),
        rem.alias("r"), F.col("a.ms").alias("ma"), F.col("b.ms").alias("mb"), F.col("a.total").alias("ta"),
        F.col("b.total").alias("tb"), F.col("a.rt").alias("rta"), F.col("b.rt").alias("rtb"),
        (F.col("a.rn") + F.col("b.rn")).alias("rn"),
        *[c for q in qis for c in _intersect(q, F)],
    )
    prior = lambda x: (F.coalesce(F.element_at("rta", x), F.lit(0)) + F.coalesce(F.element_at("rtb", x), F.lit(0))) \
        / F.col("rn")  # noqa: E731
    w = F.transform("r", lambda x: ((F.element_at("ma", x) / F.col("ta")) * (F.element_at("mb", x) / F.col("tb")))
                    / prior(x))
    out = out.withColumn("w", w)
    top = F.array_max("w")
    out = out.select(
        "release_a", "release_b", "person", F.size("r").alias("remaining"),
        F.when(F.size("r") > 0, F.element_at("r", F.array_position("w", top).cast("int"))).alias("top_value"),
        F.when(F.size("r") > 0, top / F.aggregate("w", F.lit(0.0), lambda acc, y: acc + y))
        .otherwise(F.lit(0.0)).alias("confidence"),
        (F.size("r") == 1).alias("risky"),
        *[F.col(f"`{c}`") for q in qis
          for c in ((f"{q.name}_lo", f"{q.name}_hi") if q.kind == "numeric" else (q.name,))],
    )
    return out


def _intersect(q: QuasiIdentifier, F):
    if q.kind == "numeric":
        lo = F.greatest(F.col(f"a.`{q.name}_lo`"), F.col(f"b.`{q.name}_lo`"))
        hi = F.least(F.col(f"a.`{q.name}_hi`"), F.col(f"b.`{q.name}_hi`"))
        return F.when(lo <= hi, lo).alias(f"{q.name}_lo"), F.when(lo <= hi, hi).alias(f"{q.name}_hi")
    m = _leafset_map(q)
    va, vb = F.col(f"a.`{q.name}`"), F.col(f"b.`{q.name}`")
    la, lb = F.element_at(m, va), F.element_at(m, vb)
    return (F.when(va.isNull() | vb.isNull(), F.lit(None).cast("string"))
            .when(F.size(F.array_intersect(la, lb)) == 0, F.lit(None).cast("string"))
            .when(F.size(la) <= F.size(lb), va).otherwise(vb).alias(q.name),)


def audit_summary(pairs) -> AuditSummary:
    """Per pair of releases and overall: overlapping people, privacy-risk tuples, confidence histogram.

    Aggregates only (one row per pair of releases reaches the driver). Returns an
    :class:`~fragrelease.publications.params.AuditSummary` (its ``note`` set when no person
    appears in two releases).
    """
    from pyspark.sql import functions as F

    bins = []
    for lo, hi in zip(CONFIDENCE_BINS[:-1], CONFIDENCE_BINS[1:]):
        bins.append(F.sum(((F.col("confidence") >= lo) & (F.col("confidence") < hi)).cast("long"))
                    .alias(f"[{lo:.1f},{hi:.1f})"))
    bins.append(F.sum((F.col("confidence") >= 1.0).cast("long")).alias("1"))
    agg = (pairs.groupBy("release_a", "release_b")
           .agg(F.count(F.lit(1)).alias("overlapping"), F.sum(F.col("risky").cast("long")).alias("risky"),
                F.avg("confidence").alias("mean_confidence"), F.max("confidence").alias("max_confidence"), *bins)
           .orderBy("release_a", "release_b").toPandas())
    people = aggregate_row(pairs.groupBy("person").agg(F.max(F.col("risky").cast("int")).alias("r"))
                           .agg(F.count(F.lit(1)).alias("n"), F.sum("r").alias("r")))
    overlapping, risky_people = int(people["n"] or 0), int(people["r"] or 0)
    per_pair = []
    for row in agg.to_dict("records"):
        hist = {k: int(row.pop(k) or 0) for k in [c for c in list(row) if c.startswith("[") or c == "1"]}
        row["risky"] = int(row["risky"] or 0)
        row["overlapping"] = int(row["overlapping"])
        row["confidence_histogram"] = hist
        per_pair.append(row)
    return AuditSummary(pairs=tuple(per_pair), overlapping_people=int(overlapping), risky_people=int(risky_people),
                        max_risky_in_a_pair=max((p["risky"] for p in per_pair), default=0),
                        note=None if overlapping else "no person appears in two releases")


# ----------------------------------------------------------------------------- runners
def read_table(spark, path: str):
    """A Delta table (through its active files) or else Parquet files at ``path``."""
    from ..storage import is_delta_table, read_delta

    if is_delta_table(path):
        return read_delta(spark, path)
    if not os.path.exists(path) and "://" not in path:
        raise ConfigError(f"release {path!r} does not exist")
    return spark.read.parquet(path)


def publication_guarantee(method: str, *, k: int, l: int, mu: float, eta: int) -> str:
    """The guarantee an independent publication states in its provenance (public parameters only).

    Mondrian (docs/specification.md §8): every equivalence class of each publisher holds at least k
    records and ℓ distinct sensitive values. δ-cloning (Baig et al., CIKM 2011; docs/specification.md
    §5): classes of at least k records whose sensitive distributions are cloned so that the
    composition attack across publishers is resisted (docs/publications.md). Neither is
    differential privacy.
    """
    if method == "mondrian":
        return (f"syntactic: each publisher's equivalence classes hold at least {k} records and {l} distinct "
                "sensitive values (Mondrian); independent releases of the same people can be linked by the "
                "composition attack; not differential privacy")
    return (f"syntactic: delta-cloning by micro-statistics with k = {k}, mu = {mu}, eta = {eta}, against the "
            "composition attack across independent publishers (Baig et al., CIKM 2011); not differential privacy")


#: What the composition audit's table states: it is an auditor's report, not a protected release.
AUDIT_GUARANTEE = "none: the privacy-risk tuples of a composition audit name people; for the publishers' auditors only"


def publication_provenance(params: AnonymizeParams) -> Mapping[str, object]:
    """The public facts a publication's commit carries (its parameters only; stamped by the commit)."""
    provenance: dict[str, object] = {
        "kind": "independent-publication", "method": params.method, "k": params.k, "sensitive": params.sensitive,
        "quasi_identifiers": [q.name for q in params.qis],
        "source": "docs/specification.md §5" if params.method == "cloning" else "docs/specification.md §8",
    }
    if params.method == "mondrian":
        provenance["l"] = params.l
    else:
        provenance.update({"mu": params.mu, "eta": params.eta})
    return provenance


def run_anonymize(spark, params: AnonymizeParams) -> AnonymizeResult:
    """Read the source, anonymize every publisher, commit one Delta release; return version and report.

    Returns an :class:`~fragrelease.publications.params.AnonymizeResult`: the release's path and
    version, the provenance stamped into its commit (:func:`fragrelease.jobs.storage.stamp_provenance`)
    and, for cloning, the per-publisher report (:func:`cloning_report`).

    Raises
    ------
    ReleaseExistsError
        The output exists and ``if_exists`` is ``"error"`` (before any work).
    ConfigError, SchemaMismatchError, InvalidParameterError
        A missing source or column, or bad parameters (from :func:`anonymize_publications`).
    """
    from ..storage import commit_release, read_source, refuse_existing, stamp_provenance

    p = params
    refuse_existing(path=p.output, if_exists=p.if_exists)
    df = read_source(spark, p.source, p.fmt)
    rel = anonymize_publications(df, method=p.method, qis=p.qis, sensitive=p.sensitive, k=p.k, l=p.l, mu=p.mu,
                                 eta=p.eta, publisher=p.publisher, keep=p.keep)
    rel = rel.localCheckpoint(eager=True)  # the cloning order is random: never redraw it on a retry
    guarantee = publication_guarantee(p.method, k=p.k, l=p.l, mu=p.mu, eta=p.eta)
    provenance = publication_provenance(p)
    _, version = commit_release(rel, system="publications", provenance=provenance, guarantee=guarantee, path=p.output,
                                if_exists=p.if_exists)
    report = cloning_report(df, rel, sensitive=p.sensitive, publisher=p.publisher) if p.method == "cloning" else None
    return AnonymizeResult(path=p.output, version=version, report=report,
                           provenance=stamp_provenance(provenance, system="publications", guarantee=guarantee))


def run_audit(spark, params: AuditParams) -> AuditResult:
    """Audit the releases, commit the privacy-risk tuples as a Delta table and write the summary JSON.

    ``params.counterfeit_bound``: see :func:`composition_audit` (None for cloned releases of older versions).

    The summary goes to ``<output>.summary.json`` (it counts people; the risky table names them: both
    are for the publishers' auditors, not for publication). Returns an
    :class:`~fragrelease.publications.params.AuditResult` (path, version, summary).

    Raises
    ------
    SchemaMismatchError
        Fewer than two releases and no publisher column.
    ReleaseExistsError
        The output exists and ``if_exists`` is ``"error"`` (before any work).
    """
    from ..storage import commit_release, refuse_existing, write_text

    p = params
    if len(p.releases) < 2 and not p.publisher:
        raise SchemaMismatchError(f"the audit needs at least two releases, not {len(p.releases)}")
    refuse_existing(path=p.output, if_exists=p.if_exists)
    tables = {}
    for i, path in enumerate(p.releases):
        name = os.path.basename(os.path.normpath(path)) or f"release{i}"
        if name in tables:
            name = f"{name}#{i}"
        tables[name] = read_table(spark, path)
    pairs = composition_audit(tables, person=p.person, sensitive=p.sensitive, publisher=p.publisher, qis=p.qis,
                              counterfeit_bound=p.counterfeit_bound)
    pairs = pairs.localCheckpoint(eager=True)
    summary = audit_summary(pairs)
    risky = pairs.where("risky")
    _, version = commit_release(risky, system="publications", guarantee=AUDIT_GUARANTEE, path=p.output,
                                provenance={"kind": "composition-audit", "releases": list(p.releases),
                                            "sensitive": p.sensitive, "counterfeit_bound": p.counterfeit_bound},
                                if_exists=p.if_exists)
    write_text(f"{p.output.rstrip('/')}.summary.json", summary.to_json())
    return AuditResult(path=p.output, version=version, summary=summary)
