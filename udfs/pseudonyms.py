"""The keyed-pseudonym UDF: HMAC-SHA-256 of each record id's text on the executors.

The key travels to the executors inside the UDF's pickled closure (a Python object serialized with
the task), never as a literal of the Spark plan: ``explain()`` shows the UDF's name and its input
column only, and nothing here logs it (a test checks the plan text). The hash is keyed and
deterministic, so the UDF is left deterministic: recomputing a partition gives the same pseudonyms.
"""
from __future__ import annotations

import pandas as pd
from pyspark.sql.functions import pandas_udf
from pyspark.sql.types import StringType

from fragrelease.pseudonyms import check_key, pseudonyms


def pseudonym_udf(key: bytes, context: str = ""):
    """UDF ``(id text) -> pseudonym`` (string, 64 hex characters): :func:`fragrelease.pseudonyms.pseudonym`.

    Column in: the record id cast to string (``cast(id as string)``, decimal for integral ids, the
    canonical text of :func:`fragrelease.pseudonyms.canonical_id_text`), never null (fragments are
    validated first). ``context``: the plan id for a release's fragments, ``"metadata"`` for the
    metadata step's digest. Built on each call (after the session exists).

    Raises
    ------
    PseudonymKeyError
        A key shorter than 32 bytes (at once, on the driver).
    """
    secret = bytes(check_key(key))

    @pandas_udf(StringType())  # type: ignore[call-overload]  # pyspark's stubs lack the type-hint form
    def pseudonymize(ids: pd.Series) -> pd.Series:
        return pd.Series(pseudonyms(secret, ids.tolist(), context=context), dtype=object)

    return pseudonymize
