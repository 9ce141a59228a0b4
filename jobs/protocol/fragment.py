"""Fragment checks: a data owner's fragment against the schema before any budget is spent (docs/specification.md §1-3).

Shapes: in, a fragment (any DataFrame holding the id column and the attributes); out, a
:class:`FragmentCheck` (the record count, public) or a one-line error that starts with the owner and
its source (:class:`FragmentContext`) and names the column, one value as written and its record id.
:func:`conform_id` casts the id column to the declared id type. One aggregation pass that counts
the rows failing each check (plus one grouped count for duplicate ids); only when a check fails, one
more query fetches one example for its message. Nothing is collected but that one row, at most one
example and at most one duplicate id.
The same pass can count the declared categories (``count_categories``) for the ``dp-frequency`` order.
:func:`validate_source_fragment` runs that validation once per process for the same source bytes
(a local file, checked by its SHA-256), so an owner's protect step does not repeat what its
metadata step found in the same driver.
"""
from __future__ import annotations

import hashlib
import os
import stat
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence
from urllib.parse import unquote, urlparse

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from fragrelease.errors import DomainError, IdentifierError, SchemaMismatchError
from fragrelease.schemas.base import Attribute


@dataclass(frozen=True)
class FragmentCheck:
    """Result of :func:`validate_fragment`: the record count (public) and, when asked for, the exact
    category counts of the categorical attributes.

    ``category_counts`` (attribute → category → count, every declared category) is the owner's own
    data: only :func:`fragrelease.jobs.idpir.protect.category_orders` reads it, to noise it with
    budget (``dp-frequency``); it is kept out of ``repr`` so it reaches no log line by accident.
    """

    n_records: int
    category_counts: Optional[Mapping[str, Mapping[str, int]]] = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class FragmentContext:
    """Whose fragment is validated and where it was read: every data error starts with it.

    ``owner`` is the data owner's name; ``source`` a description of where the fragment was read (a
    path, ``table db.name``, ``DataFrame``; :func:`describe_source`). Errors read like
    ``owner 'clinic-a' (source /data/a.csv): column 'age' value 'abc' (record id 17) is not a number``.
    """

    owner: str
    source: str

    def where(self) -> str:
        return f"owner {self.owner!r} (source {self.source})"


def describe_source(source: object) -> str:
    """A :class:`fragrelease.protocol.config.SourceConfig` as the owner knows it: its path, or ``table <name>``.

    A DataFrame handed to :class:`fragrelease.jobs.api.Release` (a temporary view) reads ``DataFrame``.
    """
    path = getattr(source, "path", None)
    if path is not None:
        return str(path)
    table = str(getattr(source, "table", source))
    return "DataFrame" if table.startswith("fragrelease_src_") else f"table {table}"


_NUMERIC_TYPES = (T.IntegerType, T.LongType, T.ShortType, T.ByteType, T.DoubleType, T.FloatType, T.DecimalType)
_INTEGRAL_TYPES = (T.IntegerType, T.LongType, T.ShortType, T.ByteType)


def _spark_type_ok(attr: Attribute, dtype: T.DataType) -> bool:
    if attr.type == "string" or attr.categorical:
        return isinstance(dtype, T.StringType)
    return isinstance(dtype, _NUMERIC_TYPES)


def _checkable(attr: Attribute, dtype: T.DataType) -> bool:
    """A type whose values :func:`validate_fragment` checks one by one (strings in numeric columns, numbers
    in categorical ones); other wrong types (dates, booleans, structs) are refused by type alone."""
    return _spark_type_ok(attr, dtype) or isinstance(dtype, (T.StringType, *_NUMERIC_TYPES))


def _where(context: Optional[FragmentContext]) -> str:
    return context.where() if context is not None else "fragment"


def check_columns(df: DataFrame, attributes: Sequence[Attribute], id_column: Optional[str],
                  context: Optional[FragmentContext] = None, *, types: bool = True) -> None:
    """Raise SchemaMismatchError if a column is missing or has a type no value of it could fit; no Spark job.

    Strings in numeric columns and numbers in categorical columns pass here: :func:`validate_fragment`
    names one offending value and its record id. ``types=False`` checks the names only
    (:func:`validate_fragment` then refuses a wrong type naming one value).

    Raises
    ------
    SchemaMismatchError
        ``<owner (source)>: the fragment has no column 'x'; it has [...]`` or a type such as a date
        where the schema declares a number.
    """
    where = _where(context)
    fields = {f.name: f.dataType for f in df.schema.fields}
    for attr in attributes:
        if attr.name not in fields:
            raise SchemaMismatchError(f"{where}: the fragment has no column {attr.name!r}; it has {sorted(fields)}")
        if types and not _checkable(attr, fields[attr.name]):
            raise SchemaMismatchError(f"{where}: column {attr.name!r} has type {fields[attr.name].simpleString()}, "
                                      f"the schema declares {attr.kind or attr.type} ({attr.type})")
    if id_column is not None and id_column not in fields:
        raise SchemaMismatchError(f"{where}: the fragment has no id column {id_column!r}; it has {sorted(fields)}")


#: An integer id as text: optional blanks, an optional sign, digits (``01006``, ``+1006``, `` 1006``); no
#: fraction or exponent (``1006.0``, ``1e3`` are refused: an integer id is not written as a decimal).
_INTEGER_TEXT = r"^\s*[+-]?[0-9]+\s*$"


def _id_value(id_type: Optional[str], dtype: T.DataType) -> Optional[Column]:
    """The value of the id column ``__id_raw`` as the declared id type compares it, or None when the
    column's own values already are (a numeric id of a numeric type, a string id, no declared type).

    Integer ids written as text are parsed (``01006``, ``+1006``, `` 1006`` and ``1006`` are one id,
    1006) as ``decimal(38,0)``, null for a value that is not an integer; ``double`` ids written as text
    are parsed as doubles (blanks around them ignored). String ids are compared as written: no blank is
    stripped (``'A1'`` and ``'A1 '`` are two ids; docs/specification.md §3, "Record ids").
    """
    raw = F.col("__id_raw")
    if not isinstance(dtype, T.StringType):
        return None
    if id_type in ("integer", "long"):
        return F.when(raw.rlike(_INTEGER_TEXT), F.trim(raw).try_cast("decimal(38,0)"))
    if id_type == "double":
        return F.trim(raw).try_cast("double")
    return None


def _id_problem(id_type: Optional[str], dtype: T.DataType) -> Optional[tuple[Column, str]]:
    """(condition on the id column flagging a value the declared id type cannot hold, what it should be)."""
    parsed = _id_value(id_type, dtype)
    if id_type in ("integer", "long"):
        if isinstance(dtype, _INTEGRAL_TYPES):
            return None
        if parsed is not None:
            bound = 2**31 - 1 if id_type == "integer" else 2**63 - 1
            return (parsed.isNull() | (F.abs(parsed) > bound)), "an integer"
        if isinstance(dtype, _NUMERIC_TYPES):
            c = F.col("__id_raw").cast("double")
            return (F.isnan(c) | (c != F.floor(c))), "an integer"
        return F.lit(True), "an integer"
    if id_type == "double":
        if isinstance(dtype, _NUMERIC_TYPES):
            return None
        if parsed is not None:
            return parsed.isNull() | F.isnan(parsed) | (F.abs(parsed) == float("inf")), "a finite number"
        return F.lit(True), "a number"
    return None  # string ids (or none declared): every value has a text form


def _id_text(value: object, id_type: Optional[str]) -> str:
    """A record id for a message: a numeric id read as text (a CSV read without inference) as written,
    like a number (``17``); anything else with repr (``17``, ``'x17'``)."""
    return value if isinstance(value, str) and id_type in ("integer", "long", "double") else repr(value)


def _raise_first(frame: DataFrame, check: tuple[str, int, Column, Column], count: int, rid: Column,
                 attributes: Sequence[Attribute], fields: Mapping[str, T.DataType], id_column: Optional[str],
                 id_check: Optional[tuple[Column, str]], id_type: Optional[str], where: str) -> None:
    """Raise the error of a failed check of :func:`validate_fragment`, with one example fetched for it.

    The example (one value as written and its record id) comes from a query of its own, on the error
    path only; a fragment that changed between the two reads is said to have changed.
    """
    name, i, cond, value = check
    if name == "idnull":  # the count says it all: no example to fetch
        raise IdentifierError(f"{where}: id column {id_column!r} has {count} null value(s); every record needs an id")
    got = frame.where(cond).select(value.cast("string").alias("v"), rid.alias("id")).limit(1).collect()
    if not got:
        raise SchemaMismatchError(f"{where}: the fragment changed while it was read; run the step again")
    ex = got[0]
    rid_text = _id_text(ex["id"], id_type)
    if name == "idbad" and id_check is not None and id_column is not None:
        raise IdentifierError(f"{where}: id column {id_column!r} value {ex['v']!r} is not {id_check[1]}; "
                              f"the schema declares the id {id_type} (column type {fields[id_column].simpleString()})")
    a = attributes[i]
    if name == "null":
        raise DomainError(f"{where}: column {a.name!r} has {count} null value(s), e.g. record id {rid_text}; "
                          "nulls are not allowed")
    if name == "nan":
        raise DomainError(f"{where}: column {a.name!r} value {ex['v']!r} (record id {rid_text}) is not a number; "
                          f"the schema declares {a.type} in [{a.bounds()[0]}, {a.bounds()[1]}]")
    if name == "bad":
        if a.categorical:
            what = f"is not a declared category of {list(a.categories or ())}"
        else:
            what = f"is outside its declared domain [{a.bounds()[0]}, {a.bounds()[1]}]"
        raise DomainError(f"{where}: column {a.name!r} value {ex['v']!r} (record id {rid_text}) {what} "
                          f"({count} such value(s))")
    if name == "frac":
        raise DomainError(f"{where}: column {a.name!r} value {ex['v']!r} (record id {rid_text}) is not an "
                          f"integer; the schema declares {a.type}")
    raise SchemaMismatchError(f"{where}: column {a.name!r} has type {fields[a.name].simpleString()}, the schema "
                              f"declares {a.kind} ({a.type}); e.g. value {ex['v']!r} (record id {rid_text})")


def validate_fragment(df: DataFrame, attributes: Sequence[Attribute], id_column: Optional[str],
                      context: Optional[FragmentContext] = None, *, id_type: Optional[str] = None,
                      count_categories: bool = False, text: bool = False,
                      single_partition: bool = False) -> FragmentCheck:
    """Check a fragment before any budget is spent or any noise drawn; one Spark aggregation pass
    (plus one grouped count for duplicate ids).

    ``count_categories``: the same pass also counts every declared category of every categorical
    attribute (:attr:`FragmentCheck.category_counts`, for the ``dp-frequency`` order, which
    otherwise needs a pass of its own); the counts are returned only when the fragment is valid.

    Every error is one line that starts with ``context`` (the owner and its source) and names the
    column, one offending value as written and its record id, e.g. ``owner 'clinic-a' (source
    /data/a.csv): column 'age' value 'abc' (record id 17) is not a number``. The value is shown to
    the owner only, never published or logged.

    Parameters
    ----------
    df : the fragment: ``id_column`` and every attribute (other columns are ignored).
    attributes : the attributes to check against their declared domains or categories.
    id_column : the record id column.
    context : whose fragment and where it was read (:class:`FragmentContext`).
    id_type : the id column's declared type (``integer``, ``long``, ``double``, ``string``): ids the
        type cannot hold (``'x17'`` where the schema says ``long``) are refused here, before any noise,
        not at the aggregator.
    text : the fragment was read as text (a CSV source, :func:`fragrelease.jobs.storage.csv_source.read_csv_text`):
        a string column of a numeric attribute is parsed value by value (a value that is not a number
        is named) instead of being refused by its type; :func:`conform_attributes` casts it afterwards.
    single_partition : ``df`` is known to be one partition (one small file read whole): the aggregation
        and the grouped count then run in that one task, without a shuffle (one Spark job each instead
        of two). Same checks, counts and messages.

    Raises
    ------
    SchemaMismatchError
        Missing column, or a type no value could fit; a string column declared numeric whose
        values all parse (named with one value and its record id).
    DomainError
        The fragment is empty (also an empty CSV, read as no or string columns); a null; a value that
        is not a number; a numeric value outside [lo, hi] or NaN/infinite; a non-integer in an integer
        column; a category that is not declared.
    IdentifierError
        Null or duplicate ids, or ids that the declared id type cannot hold. Ids are compared as
        values of the declared type: integer ids read as text are parsed (``01006``, ``+1006``,
        `` 1006`` and ``1006`` are one id, refused as a duplicate naming two of its spellings);
        ``1006.0`` is not an integer id. String ids are compared as written, blanks included.
    """
    where = _where(context)
    try:
        check_columns(df, attributes, id_column, context, types=False)
    except SchemaMismatchError:
        # an empty CSV reads as string columns (or none): say "empty", not "wrong type"
        if df.isEmpty():
            raise DomainError(f"{where}: the fragment is empty: it has no records") from None
        raise
    fields = {f.name: f.dataType for f in df.schema.fields}
    rid = F.col(id_column) if id_column is not None else F.lit(None).cast("string")  # shown with repr: 17, 'x17'
    # every check is a row condition, counted in the one pass; an example (one value as written and its
    # record id) is fetched only for the first check that fails, by a query of its own (the error path)
    checks: list[tuple[str, int, Column, Column]] = []  # (kind, attribute index or -1 for the id, condition, value)
    for i, a in enumerate(attributes):
        col = F.col(a.name)
        dtype = fields[a.name]
        present = col.isNotNull()
        checks.append(("null", i, col.isNull(), col))
        if not _checkable(a, dtype):  # a date, a boolean, a struct, ...: refused by type, naming one value
            checks.append(("type", i, present, col))
            continue
        if a.categorical:
            bad = present & ~col.cast("string").isin(list(a.categories or ()))
        else:
            num = col.try_cast("double") if isinstance(dtype, T.StringType) else col.cast("double")
            if isinstance(dtype, T.StringType):
                checks.append(("nan", i, present & num.isNull(), col))
            lo, hi = a.bounds()
            bad = num.isNotNull() & ((num < lo) | (num > hi) | F.isnan(num))
        checks.append(("bad", i, bad, col))
        if not a.categorical and a.type in ("integer", "long"):  # e.g. a CSV column read as double
            checks.append(("frac", i, num.isNotNull() & (num != F.floor(num)), col))
        if not _spark_type_ok(a, dtype) and not (text and isinstance(dtype, T.StringType)):
            checks.append(("type", i, present, col))
    id_check = None
    if id_column is not None:
        checks.append(("idnull", -1, F.col(id_column).isNull(), F.col(id_column)))
        id_check = _id_problem(id_type, fields[id_column])
        if id_check is not None:
            checks.append(("idbad", -1, F.col(id_column).isNotNull() & id_check[0], F.col(id_column)))
    aggs = [F.count(F.lit(1)).alias("__n")] + [F.count_if(cond).alias(f"__c{m}") for m, (_, _, cond, _) in enumerate(checks)]
    counted = [(i, a) for i, a in enumerate(attributes) if count_categories and a.categorical]
    for i, a in counted:  # the owner's exact counts: noised with budget before any use (dp-frequency)
        label = F.col(a.name).cast("string")
        aggs.extend(F.count_if(label == c).alias(f"__cat{i}_{m}") for m, c in enumerate(a.categories or ()))
    frame = df.withColumn("__id_raw", F.col(id_column)) if id_check is not None and id_column is not None else df
    # one partition already: declared so, the aggregation needs no exchange (a narrow coalesce, no data moves)
    scanned = frame.coalesce(1) if single_partition else frame
    row = scanned.agg(*aggs).collect()[0]  # an aggregation: exactly one row
    n = int(row["__n"])
    if n == 0:
        raise DomainError(f"{where}: the fragment is empty: it has no records")
    failed = next((m for m in range(len(checks)) if row[f"__c{m}"]), None)
    if failed is not None:
        _raise_first(frame, checks[failed], int(row[f"__c{failed}"]), rid, attributes, fields,
                     id_column, id_check, id_type, where)
    if id_column is not None:
        _refuse_duplicate_ids(df.coalesce(1) if single_partition else df, id_column, id_type, fields[id_column], where)
    if not count_categories:
        return FragmentCheck(n_records=n)
    counts = {a.name: {c: int(row[f"__cat{i}_{m}"] or 0) for m, c in enumerate(a.categories or ())} for i, a in counted}
    return FragmentCheck(n_records=n, category_counts=counts)


def _refuse_duplicate_ids(df: DataFrame, id_column: str, id_type: Optional[str], dtype: T.DataType, where: str) -> None:
    """Raise IdentifierError when two records hold the same id, compared as values of the declared id
    type (:func:`_id_value`: ``01006`` and ``1006`` are one integer id); one grouped count, at most
    one group (the id and two of its spellings as written) reaches the driver."""
    parsed = _id_value(id_type, dtype)
    if parsed is None:
        dup = df.groupBy(id_column).count().where(F.col("count") > 1).limit(1).collect()
        if dup:
            raise IdentifierError(f"{where}: id column {id_column!r}: record id {_id_text(dup[0][id_column], id_type)} "
                                  f"appears {dup[0]['count']} times; ids must be unique")
        return
    keyed = df.select(F.col(id_column).alias("__id_raw")).select(parsed.alias("__id"), "__id_raw")
    dup = (keyed.groupBy("__id").agg(F.count(F.lit(1)).alias("n"), F.min("__id_raw").alias("a"),
                                     F.max("__id_raw").alias("b"))
           .where(F.col("n") > 1).limit(1).collect())
    if not dup:
        return
    value, a, b, n = dup[0]["__id"], dup[0]["a"], dup[0]["b"], dup[0]["n"]
    spelled = "" if a == b else f" (written {a!r} and {b!r}, the same {id_type} id)"
    raise IdentifierError(f"{where}: id column {id_column!r}: record id {value} appears {n} times"
                          f"{spelled}; ids must be unique")


def conform_id(df: DataFrame, id_column: str, id_type: Optional[str]) -> DataFrame:
    """``df`` with its id column cast to the declared ``id_type`` (after :func:`validate_fragment` passed).

    Every owner then hands the same id type to the protocol (a CSV read with string ids and a Parquet
    table with long ids line up). Integer and double ids read as text are parsed as
    :func:`validate_fragment` compared them (``+1006`` and `` 1006`` become 1006). Returns ``df``
    unchanged when the type already matches or none is declared.
    """
    spark_type = {"integer": T.IntegerType(), "long": T.LongType(), "double": T.DoubleType(),
                  "string": T.StringType()}.get(id_type or "")
    dtype = df.schema[id_column].dataType
    if spark_type is None or dtype == spark_type:
        return df
    parsed = _id_value(id_type, dtype)
    value = F.col(id_column) if parsed is None else parsed
    frame = df.withColumn("__id_raw", F.col(id_column)) if parsed is not None else df
    out = frame.withColumn(id_column, value.cast(spark_type))
    return out.drop("__id_raw") if parsed is not None else out


def conform_attributes(df: DataFrame, attributes: Sequence[Attribute]) -> DataFrame:
    """``df`` with its numeric attributes read as text (a CSV read without type inference,
    :func:`fragrelease.jobs.storage.csv_source.read_csv_text`) cast to double, after :func:`validate_fragment`
    passed (so every value parses). Other columns, numeric attributes of a numeric type and attributes
    ``df`` does not hold, unchanged.
    """
    fields = {f.name: f.dataType for f in df.schema.fields}  # a vertical owner holds some attributes only
    casts = {a.name: F.col(a.name).cast("double") for a in attributes
             if not a.categorical and isinstance(fields.get(a.name), T.StringType)}
    return df.withColumns(casts) if casts else df


def _local_file(source: object) -> Optional[str]:
    """The local path of a source that names one regular file (a plain path or a ``file:`` URI, no
    glob characters), else None."""
    path = getattr(source, "path", None)
    if not isinstance(path, str) or getattr(source, "table", None) is not None or any(c in path for c in "*?[{"):
        return None
    parsed = urlparse(path)
    if parsed.scheme == "file":
        path = unquote(parsed.path)
    elif parsed.scheme != "":
        return None
    return path if os.path.isfile(path) else None  # a folder, a device, a pipe: not one file's bytes


#: The largest local source file whose validation is kept for reuse (its SHA-256 is taken on the driver
#: twice per step): above it a step validates again with Spark, as every non-local source does.
REUSE_BYTES = 256 << 20


def local_source_digest(source: object) -> Optional[str]:
    """SHA-256 (hex) of the bytes of a fragment source that is one local regular file, or None.

    ``source`` is a :class:`fragrelease.protocol.config.SourceConfig`; its ``path`` counts when it is a
    plain path or a ``file:`` URI without glob characters and names a regular file. Anything else
    (a catalog table, a folder, a remote URI, a missing or unreadable file) gives None: no digest,
    nothing reused. A file larger than :data:`REUSE_BYTES` gives None too: hashing it on the driver
    would cost more than the validation it saves. The file is read on the driver in 1 MiB blocks; no
    Spark job.
    """
    path = _local_file(source)
    if path is None:
        return None
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > REUSE_BYTES:
                return None
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


#: The largest source file :func:`validate_source_fragment` validates in one task (no shuffle): a small
#: file's two shuffles cost more than its one task's work; a larger one keeps the parallel aggregation.
SINGLE_TASK_BYTES = 64 << 20


def _one_small_partition(source: object) -> bool:
    """``source`` is one local CSV file of at most :data:`SINGLE_TASK_BYTES` read with ``multiLine``
    (the default, :data:`fragrelease.jobs.storage.csv_source.RFC4180_OPTIONS`): Spark reads it whole, in one
    partition (a multi-line CSV file is never split)."""
    if getattr(source, "format", None) != "csv":
        return False
    options = {str(k).lower(): str(v).lower() for k, v in (getattr(source, "options", None) or {}).items()}
    if options.get("multiline", "true") != "true":
        return False
    path = _local_file(source)
    try:
        return path is not None and os.path.getsize(path) <= SINGLE_TASK_BYTES
    except OSError:
        return False


#: Validations that passed in this process, by source bytes and everything else the checks depend on
#: (:func:`validate_source_fragment`); the owner's own process memory only, never written anywhere.
_VALIDATED: OrderedDict[tuple, FragmentCheck] = OrderedDict()
_VALIDATED_MAX = 32
_VALIDATED_LOCK = threading.Lock()


def validate_source_fragment(df: DataFrame, source: object, attributes: Sequence[Attribute], id_column: Optional[str],
                             context: Optional[FragmentContext] = None, *, id_type: Optional[str] = None,
                             count_categories: bool = False, text: bool = False) -> FragmentCheck:
    """:func:`validate_fragment` of ``df``, the fragment read from ``source``, run at most once per process
    for the same input.

    When ``source`` is one local file (:func:`local_source_digest`), a validation that passed is kept
    in this process's memory under the SHA-256 of the file's bytes (taken before and after the
    validation's read; kept only when both agree), with the source's configuration, the owner and
    source of ``context``, ``df``'s schema, the attributes, the id column, ``id_type`` and ``text``.
    A later call with all of these equal (an owner's protect step after its metadata step in one
    driver) returns the kept :class:`FragmentCheck` without a Spark job; a kept check without
    category counts does not answer ``count_categories=True``. A changed byte, another source or a
    failed validation means a full validation, as :func:`validate_fragment`. Same shapes and errors.
    """
    before = local_source_digest(source)
    key = None
    if before is not None:
        dump = getattr(source, "model_dump_json", None)
        key = (before, dump() if dump is not None else repr(source),
               (context.owner, context.source) if context is not None else None, df.schema.json(),
               tuple(a.model_dump_json() for a in attributes), id_column, id_type, text)
        with _VALIDATED_LOCK:
            kept = _VALIDATED.get(key)
        if kept is not None and (not count_categories or kept.category_counts is not None):
            return kept
    check = validate_fragment(df, attributes, id_column, context, id_type=id_type,
                              count_categories=count_categories, text=text, single_partition=_one_small_partition(source))
    if key is not None and local_source_digest(source) == before:
        with _VALIDATED_LOCK:
            _VALIDATED[key] = check
            _VALIDATED.move_to_end(key)
            while len(_VALIDATED) > _VALIDATED_MAX:
                _VALIDATED.popitem(last=False)
    return check
