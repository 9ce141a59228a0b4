"""Built-in datasets: the vendored public tables the paper evaluates (``data/``, with checksums).

``load_builtin_pandas(name)`` returns the cleaned table as pandas (public data, a few MB);
``load_builtin(spark, name)`` returns it as a Spark DataFrame with the declared StructType.
Every file is checked against ``data/SHA256SUMS.sha256`` before it is parsed.
"""
from __future__ import annotations

import hashlib
import io
from importlib import resources
from pathlib import Path

import pandas as pd

from fragrelease.errors import ConfigError

from . import adult, wine
from .base import DatasetSchema, load_schema

BUILTIN_SCHEMAS: dict[str, DatasetSchema] = {
    "adult": adult.SCHEMA,
    "adult-income": adult.SCHEMA_WITH_INCOME,
    "adult-income-train": adult.SCHEMA_WITH_INCOME_TRAIN,
    "wine": wine.SCHEMA,
    "wine-2max": wine.SCHEMA_TWICE_MAX,
}


def _data_file(relpath: str):
    """A vendored file as an importlib Traversable (works from a folder, a wheel or a zip)."""
    node = resources.files("fragrelease.data")
    for part in relpath.split("/"):
        node = node.joinpath(part)
    return node


def resolve_schema(dataset: str) -> DatasetSchema:
    """A built-in schema by name (``adult``, ``adult-income``, ``adult-income-train``, ``wine``, ``wine-2max``) or a schema YAML by path.

    Raises
    ------
    ConfigError
        A ``.yaml``/``.yml`` path that does not exist (``dataset: schema file not found: PATH``, with the
        absolute path looked at), or an unknown name that is not such a path.
    """
    if dataset in BUILTIN_SCHEMAS:
        return BUILTIN_SCHEMAS[dataset]
    if Path(dataset).suffix in (".yaml", ".yml"):
        if not Path(dataset).exists():
            raise ConfigError(f"dataset: schema file not found: {dataset!r} (looked at {str(Path(dataset).absolute())!r})")
        return load_schema(dataset)
    raise ConfigError(f"dataset must be one of {sorted(BUILTIN_SCHEMAS)} or a schema YAML file, not {dataset!r}")


def _verified(relpath: str) -> io.BytesIO:
    """The bytes of a vendored file, after checking them against ``SHA256SUMS.sha256``."""
    sums = {}
    for line in _data_file("SHA256SUMS.sha256").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        sums[name.strip()] = digest
    raw = _data_file(relpath).read_bytes()
    actual = hashlib.sha256(raw).hexdigest()
    if sums.get(relpath) != actual:
        raise ConfigError(f"checksum of vendored file {relpath!r} is {actual}, expected {sums.get(relpath)}")
    return io.BytesIO(raw)


def _adult_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    frames = []
    for name, skip in (("adult/adult.data", 0), ("adult/adult.test", 1)):
        df = pd.read_csv(_verified(name), header=None, names=list(adult.RAW_COLUMNS), skiprows=skip,
                         dtype=str, skipinitialspace=True, skip_blank_lines=True)
        df = df.apply(lambda col: col.str.strip())
        df = df[~(df == "?").any(axis=1)].dropna()
        df["income"] = df["income"].str.rstrip(".")
        frames.append(df)
    return frames[0], frames[1]


def _load_adult() -> pd.DataFrame:
    df = pd.concat(_adult_frames(), ignore_index=True)
    for col in ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"):
        df[col] = df[col].astype("int32")
    df.insert(0, "record_id", range(len(df)))
    df["record_id"] = df["record_id"].astype("int64")
    return df[[a.name for a in adult.SCHEMA.attributes]]


def load_adult_train_test() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Adult split as distributed: (adult.data, adult.test) rows of :func:`load_builtin_pandas`.

    Returns the 30,162 cleaned rows of ``adult.data`` and the 15,060 of ``adult.test`` (records with
    '?' removed, the test file's trailing '.' stripped from ``income``), with the columns and
    ``record_id`` values of the concatenated table (test ids start at 30,162).

    Raises
    ------
    ConfigError
        A vendored file whose checksum does not match.
    """
    df = _load_adult()
    n_train = len(_adult_frames()[0])
    return df.iloc[:n_train].reset_index(drop=True), df.iloc[n_train:].reset_index(drop=True)


def _load_wine(schema: DatasetSchema) -> pd.DataFrame:
    frames = []
    for color in ("red", "white"):
        df = pd.read_csv(_verified(f"wine/winequality-{color}.csv"), sep=";")
        df["color"] = color
        frames.append(df)
    df = pd.concat(frames, ignore_index=True).rename(columns=wine.RENAME)
    df.insert(0, "record_id", range(len(df)))
    df["record_id"] = df["record_id"].astype("int64")
    df["quality"] = df["quality"].astype("int32")
    return df[[a.name for a in schema.attributes]]


def load_builtin_pandas(name: str) -> pd.DataFrame:
    """Cleaned built-in dataset as pandas: Adult 45,222 rows (``adult-income-train``: adult.data's 30,162), Wine 6,497 rows.

    Raises
    ------
    ConfigError
        Unknown name or a vendored file whose checksum does not match.
    """
    if name == "adult":
        return _load_adult()
    if name == "adult-income":
        return _load_adult()  # the same table: income is a column of it
    if name == "adult-income-train":
        return load_adult_train_test()[0]  # adult.data's rows, ids 0..30,161; adult.test held out
    if name in ("wine", "wine-2max"):
        return _load_wine(BUILTIN_SCHEMAS[name])
    raise ConfigError(f"built-in dataset must be one of {sorted(BUILTIN_SCHEMAS)}, not {name!r}")


def load_builtin(spark, name: str):
    """Cleaned built-in dataset as a Spark DataFrame with the schema's StructType."""
    schema = resolve_schema(name)
    return spark.createDataFrame(load_builtin_pandas(name), schema=schema.struct_type())


#: Adult attributes with an ARX generalization hierarchy in ``data/adult/hierarchies/``, keyed by
#: the Adult schema's column name; values are the hierarchy file's attribute name.
ADULT_TAXONOMY_FILES: dict[str, str] = {
    "age": "age",
    "education": "education",
    "marital-status": "marital-status",
    "native-country": "native-country",
    "occupation": "occupation",
    "race": "race",
    "income": "salary-class",
    "sex": "sex",
    "workclass": "workclass",
}


def load_adult_taxonomy(attribute: str) -> list[list[str]]:
    """The ARX generalization hierarchy of one Adult attribute, one path per leaf.

    Each returned path is ``[leaf, level 1, ..., "*"]`` exactly as the vendored file
    ``data/adult/hierarchies/adult_hierarchy_<name>.csv`` (``;``-separated, no header) lists it;
    all paths of one attribute have the same length and end in the root ``"*"``. ``age`` leaves
    are the strings ``"1"`` … ``"100"``.

    ``attribute`` is the Adult schema's column name (``marital-status``, ``native-country``,
    ``income``, ...) or the ARX name (``salary-class`` for ``income``).

    Source: ARX (Prasser et al. 2020), vendored with attribution in ``data/README.md``.

    Raises
    ------
    ConfigError
        No hierarchy for that attribute, or a checksum mismatch.
    """
    names = {**ADULT_TAXONOMY_FILES, **{v: v for v in ADULT_TAXONOMY_FILES.values()}}
    if attribute not in names:
        raise ConfigError(f"no Adult taxonomy for attribute {attribute!r}; known: {sorted(ADULT_TAXONOMY_FILES)}")
    text = _verified(f"adult/hierarchies/adult_hierarchy_{names[attribute]}.csv").read().decode("utf-8")
    paths = [line.split(";") for line in text.splitlines() if line.strip()]
    return [[part.strip() for part in path] for path in paths]


#: Columns of UCI ``german.data-numeric`` as named by this project (see ``data/README.md``; UCI does
#: not name them). ``credit_class`` is 1 = good, 2 = bad.
GERMAN_COLUMNS: tuple[str, ...] = (
    "checking_account", "duration", "credit_history", "credit_amount_100", "savings", "employment",
    "personal_status_sex", "residence", "property", "age", "other_installment_plans",
    "existing_credits", "people_liable", "telephone", "foreign_worker",
    "purpose_1", "purpose_2", "other_debtors_1", "other_debtors_2", "housing_1", "housing_2",
    "job_1", "job_2", "job_3", "credit_class",
)


def load_german_credit_pandas() -> pd.DataFrame:
    """UCI Statlog German Credit (``german.data-numeric``): 1,000 rows x 26 int64 columns.

    Columns: ``record_id`` (0-based row position), the 24 integer attributes of
    :data:`GERMAN_COLUMNS` and ``credit_class`` (1 = good, 2 = bad). Used by the tiered-release
    experiment (docs/specification.md §6: 24 attributes as quasi-identifiers, the credit class sensitive).

    Raises
    ------
    ConfigError
        Checksum mismatch.
    """
    df = pd.read_csv(_verified("german/german.data-numeric"), sep=r"\s+", header=None,
                     names=list(GERMAN_COLUMNS), dtype="int64")
    df.insert(0, "record_id", range(len(df)))
    df["record_id"] = df["record_id"].astype("int64")
    return df
