"""A DistDiffGen party whose data lives in its own SparkSession (docs/specification.md §7).

:class:`SparkParty` gives :func:`fragrelease.diffgen.two_party.run_party` the same four operations as the
in-memory :class:`fragrelease.diffgen.two_party.PartyInput`, computed with Spark inside the party's own
process:

- value × class marginals: ``groupBy(attribute, class).count()`` (aggregates);
- the encrypting party's per-record ciphertexts: a ``mapInPandas`` that encrypts each record's packed
  one-hot cell vector under its own public key, written as a Parquet file into the
  shared exchange folder (the ``count_cipher`` message carries its path and size, which counts as
  protocol bytes);
- the other party's homomorphic sums: it reads that file, joins it with its own cell codes on the
  record id and sums the ciphertexts per own cell with ``groupBy(cell).applyInPandas`` (only the
  per-cell sums reach its driver).

No row-level data is collected to a driver. Record ids are checked with an order-independent
aggregate digest (count and sum of Spark's ``xxhash64`` of the ids), so both parties must use this
backend.
"""
from __future__ import annotations

import math
import os
import uuid
from typing import Any, Mapping, Sequence, Union

import numpy as np
import pandas as pd

from fragrelease.diffgen.engine import Cut, SplitChooser
from fragrelease.diffgen.predictors import AttributeCounts, Predictor
from fragrelease.errors import IdentifierError, ProtocolError


def _cell_codes_pdf(cut: Cut, pdf: pd.DataFrame) -> np.ndarray:
    attrs = cut.attributes
    shape = tuple(cut.size(a) for a in attrs)
    return np.ravel_multi_index([cut.cell_codes(a, pdf[a].to_numpy()) for a in attrs], shape).astype(np.int64)


class SparkParty:
    """One party's records as a Spark DataFrame: ``record_id`` (long), the class column and its own predictors."""

    def __init__(self, spark, name: str, df, predictors: Sequence[Predictor], *, class_col: str, exchange_dir: str):
        self.spark = spark
        self.name = name
        self.df = df
        self.predictors = list(predictors)
        self.class_col = class_col
        self.exchange_dir = exchange_dir

    def prepare(self) -> None:
        from pyspark.sql import functions as F

        row = self.df.agg(F.count(F.lit(1)).alias("n"), F.countDistinct("record_id").alias("d"),
                          F.sum(F.when(F.col("record_id").isNull(), 1).otherwise(0)).alias("nulls"),
                          F.sum(F.xxhash64("record_id").cast("decimal(38,0)")).alias("h")).collect()[0]
        if row["nulls"] or row["d"] != row["n"]:
            raise IdentifierError(f"party {self.name!r} has null or duplicated record ids")
        self._n = int(row["n"])
        self._digest = f"spark-xxhash64:{row['n']}:{row['h']}"

    @property
    def n(self) -> int:
        return self._n

    def ids_digest(self) -> str:
        return self._digest

    def marginal_counts(self, class_values: Sequence[str]) -> Mapping[str, Union[AttributeCounts, SplitChooser]]:
        from .marginals import marginal_counts_spark

        return marginal_counts_spark(self.df, self.predictors, self.class_col, class_values)

    def encrypt_cells(self, pk, cut: Cut, class_values: Sequence[str], width: int, per_ct: int,
                      blocks: int) -> Mapping[str, Any]:
        from pyspark.sql.types import LongType, StringType, StructField, StructType

        from fragrelease.diffgen.paillier_ops import encrypt_codes

        n_mod = pk.n
        cls_col = self.class_col
        cidx = {v: i for i, v in enumerate(class_values)}
        schema = StructType([StructField("record_id", LongType())] +
                            [StructField(f"ct_{b}", StringType()) for b in range(blocks)])

        def encrypt(batches):
            from fragrelease.diffgen.paillier_ops import paillier_module

            paillier = paillier_module()

            key = paillier.PaillierPublicKey(n_mod)
            for pdf in batches:
                codes = _cell_codes_pdf(cut, pdf) * len(class_values) + pdf[cls_col].map(cidx).to_numpy(np.int64)
                rows = encrypt_codes(key, codes, width, per_ct, blocks)
                out = pd.DataFrame({"record_id": pdf["record_id"].to_numpy(np.int64)})
                for b in range(blocks):
                    out[f"ct_{b}"] = [r[b] for r in rows]
                yield out

        path = os.path.join(self.exchange_dir, f"count-cipher-{uuid.uuid4().hex}")
        self.df.mapInPandas(encrypt, schema).write.mode("error").parquet(path)
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs
                   if f.endswith(".parquet"))
        return {"path": path, "blocks": blocks, "file_bytes": size}

    def sum_cells(self, pk, cut: Cut, payload: Mapping[str, Any], blocks: int) -> list[list[int]]:
        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType, StringType, StructField, StructType

        if "path" not in payload:
            raise ProtocolError("expected the encrypted rows as a file in the exchange folder")
        cipher = self.spark.read.parquet(payload["path"])
        n_mod = pk.n
        own = self.df
        code_schema = StructType([StructField("record_id", LongType()), StructField("cell", LongType())])

        def code(batches):
            for pdf in batches:
                yield pd.DataFrame({"record_id": pdf["record_id"].to_numpy(np.int64),
                                    "cell": _cell_codes_pdf(cut, pdf)})

        joined = own.mapInPandas(code, code_schema).join(cipher, on="record_id", how="inner")
        matched = joined.agg(F.count(F.lit(1)).alias("m")).collect()[0]["m"]
        if matched != self.n:
            raise ProtocolError(f"{matched} of {self.n} records have an encrypted row from the other party")
        out_schema = StructType([StructField("cell", LongType())] +
                                [StructField(f"s_{b}", StringType()) for b in range(blocks)])

        def add(pdf: pd.DataFrame) -> pd.DataFrame:
            from fragrelease.diffgen.paillier_ops import paillier_module

            paillier = paillier_module()

            key = paillier.PaillierPublicKey(n_mod)
            row: dict[str, list] = {"cell": [int(pdf["cell"].iloc[0])]}
            for b in range(blocks):
                total = paillier.EncryptedNumber(key, 1, 0)  # 1 encrypts 0; the mask re-randomizes later
                for h in pdf[f"ct_{b}"]:
                    total = total + paillier.EncryptedNumber(key, int(h, 16), 0)
                row[f"s_{b}"] = [format(total.ciphertext(be_secure=False), "x")]
            return pd.DataFrame(row)

        sums = joined.groupBy("cell").applyInPandas(add, out_schema).toPandas()  # one row per own cell
        own_cells = math.prod(cut.size(a) for a in cut.attributes)
        result = [[1] * blocks for _ in range(own_cells)]  # 1 is a ciphertext of 0; masking re-randomizes it
        for _, r in sums.iterrows():
            result[int(r["cell"])] = [int(r[f"s_{b}"], 16) for b in range(blocks)]
        return result


def adult_spark_party(spark, role: str, attributes: Sequence[str], rows, exchange_dir: str) -> SparkParty:
    """A party's own Adult holdings (ids, income, its attributes) in its own SparkSession."""
    from pyspark.sql import functions as F

    from fragrelease.schemas.datasets import load_builtin
    from fragrelease.schemas.taxonomies import ADULT_CLASS, adult_predictors

    df = load_builtin(spark, "adult")
    if rows is not None:
        df = df.filter((F.col("record_id") >= rows[0]) & (F.col("record_id") < rows[1]))
    df = df.select("record_id", ADULT_CLASS, *[F.col(f"`{a}`") for a in attributes])
    return SparkParty(spark, role, df, adult_predictors(attributes), class_col=ADULT_CLASS, exchange_dir=exchange_dir)
