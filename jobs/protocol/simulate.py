"""Simulated owners for local runs and experiments: cut one table into owner fragments (docs/specification.md §3).

Horizontal: records are assigned to owners at random (a fresh CSPRNG draw on every run, as the
paper reshuffles records among owners on every run), owner j receiving exactly ``rows_j`` records.
Vertical: owner j receives the id column and its ``attributes`` for every record.
Each fragment is written as Parquet to the owner's private folder, ``<private_dir>/fragment``
(:func:`fragrelease.jobs.protocol.layout.fragment_source`), folders 0700 and files 0600 whatever the umask.
"""
from __future__ import annotations

import os
from typing import Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fragrelease.errors import ConfigError
from fragrelease.protocol.config import ReleaseConfig
from fragrelease.protocol.fragmentation import fragmentation_of
from fragrelease.schemas.base import DatasetSchema
from fragrelease.schemas.datasets import BUILTIN_SCHEMAS, load_builtin
from fragrelease.udfs.noise import secure_random_key_udf

from ..storage import read_configured
from .context import OwnerPaths, owner_paths
from .ranking import global_rank, num_partitions
from .workspace import ensure_private_dir, restrict_private_tree


def load_dataset(spark, cfg: ReleaseConfig, schema: DatasetSchema) -> DataFrame:
    """The whole table to simulate owners from: ``cfg.source`` or the built-in dataset."""
    if cfg.source is not None:
        return read_configured(spark, cfg.source)
    if cfg.dataset not in BUILTIN_SCHEMAS:
        raise ConfigError(f"dataset {cfg.dataset!r} is not built in: give 'source' or each owner's 'source'")
    return load_builtin(spark, cfg.dataset)


def split_fragments(spark, cfg: ReleaseConfig, schema: DatasetSchema, data: DataFrame) -> Mapping[str, int]:
    """Write each simulated owner's fragment; return owner → number of records written.

    Raises
    ------
    ConfigError
        Horizontal row counts that do not add up to the table's size, or unknown attributes.
    """
    id_col = schema.id_column
    if id_col is None:
        raise ConfigError(f"dataset {schema.name!r} needs an id column to simulate owners")
    sizes: dict[str, int] = {}
    if not fragmentation_of(cfg.fragmentation).by_attributes:  # deal the records
        n = data.count()
        total = sum(o.rows or 0 for o in cfg.owners)  # horizontal owners declare their rows (configuration check)
        if total != n:
            raise ConfigError(f"owners' rows add up to {total}, but the dataset has {n} records")
        keyed = data.withColumn("__key", secure_random_key_udf()(F.col(id_col)))
        keyed = keyed.localCheckpoint(eager=True)  # one draw per record, never redrawn
        ranked = global_rank(keyed.withColumn("__g", F.lit(0)), "__g", ["__key", id_col], num_partitions(spark, n))
        start = 0
        for owner in cfg.owners:
            assert owner.rows is not None  # a horizontal owner declares its rows (configuration check)
            part = ranked.where((F.col("rank") >= start) & (F.col("rank") < start + owner.rows))
            _write_private(part.select(*data.columns), owner_paths(cfg, owner))
            sizes[owner.name] = owner.rows
            start += owner.rows
        return sizes
    n = data.count()
    for owner in cfg.owners:
        assert owner.attributes is not None  # a vertical owner declares its attributes (configuration check)
        for a in owner.attributes:
            schema.attribute(a)
        _write_private(data.select(id_col, *owner.attributes), owner_paths(cfg, owner))
        sizes[owner.name] = n
    return sizes


#: written into a simulated fragment's folder; only such a folder is ever overwritten
SIMULATED_MARKER = ".fragrelease-simulated"


def _write_private(df: DataFrame, paths: OwnerPaths) -> None:
    """Write a simulated raw fragment into the owner's private folder (``paths``): folders 0700, files 0600.

    The private folder is made 0700 before Spark writes into it, so the files Spark creates with
    the process umask are never reachable by another user; they are then set to 0600.
    """
    ensure_private_dir(paths.private_dir, who=f"owner {paths.owner!r}")
    path = paths.fragment.path
    assert path is not None  # a simulated fragment is a path under the owner's private folder
    marker = os.path.join(path, SIMULATED_MARKER)
    if os.path.exists(path) and not os.path.exists(marker):
        # only a fragment an earlier simulation wrote is replaced, never a folder of the user's
        raise ConfigError(f"owner {paths.owner!r}: {path!r} exists and was not written by a fragrelease simulation "
                          f"(no {SIMULATED_MARKER}); move it or choose another private_dir")
    df.write.mode("overwrite").parquet(path)
    with open(marker, "w", encoding="utf-8") as f:  # hidden: Parquet readers skip it
        f.write("simulated fragment written by fragrelease\n")
    restrict_private_tree(path)
