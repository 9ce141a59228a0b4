"""Shared storage, behind one public face: everything a party reads from or writes to a path or a table.

Every module outside this package imports storage things from here (``from ..storage import
write_text, commit_release``), never from the modules inside it; ``tests/test_architecture.py``
checks this and that :data:`__all__` is exactly what the rest of the project uses. Inside:

- :mod:`.uris`: local paths and URIs (``s3a://``, ``abfss://``, ``dbfs:/``, ``file:/``) through
  pyarrow's file systems (:func:`fs_path`, :func:`absolute`);
- :mod:`.files`: reading fragments (:func:`read_source`, :func:`read_configured`), the protocol's
  small text files (:func:`write_text`, :func:`read_text`), reading Delta tables and committing one
  (:func:`commit_delta`, :func:`check_commit`), and every version's provenance
  (:func:`table_history`, :func:`table_provenance`, :func:`table_self_description`);
- :mod:`.csv_source`: CSV fragments read as text without Spark's inference passes;
- :mod:`.delta`: the two ways a Delta version is written (Delta's Spark API, or Parquet committed by delta-rs);
- :mod:`.catalog`: owners' sources, the release and ledgers given by catalog table name;
- :mod:`.commit`: the one commit and provenance contract of every system's release (:func:`commit_release`);
- :mod:`.output_state`: what is at a release's output before any owner spends, and the recovery of
  a crashed first commit;
- :mod:`.errors`: what a failed read or write was, in one line (the operating system's cause).

A storage backend (docs/architecture.md, "Add a storage backend") changes files here only.
"""
from __future__ import annotations

from .catalog import (
    PROP_LOCATION,
    PROP_VERSION,
    check_local_catalog,
    ensure_database,
    read_table,
    register,
    release_exists,
    table_exists,
    table_location,
    uses_catalog,
    with_table_names,
)
from .commit import IF_EXISTS, SYSTEMS, commit_release, refuse_existing, stamp_provenance
from .csv_source import check_source_encoding, csv_encoding_problem, csv_header, read_csv_text
from .errors import is_storage_failure, is_write_failure, path_cause, spark_failure_cause
from .files import (
    check_commit,
    commit_delta,
    delta_version_files,
    file_exists,
    is_delta_table,
    read_configured,
    read_delta,
    read_source,
    read_text,
    table_history,
    table_provenance,
    table_self_description,
    write_text,
)
from .output_state import (
    LEDGER_COLUMNS,
    ReleaseTarget,
    check_output,
    finish_output,
    marker_path,
    marker_text,
    prepare_output,
    release_target,
)
from .uris import absolute, fs_path

__all__ = [
    # uris
    "absolute", "fs_path",
    # files
    "check_commit", "commit_delta", "delta_version_files", "file_exists", "is_delta_table", "read_configured", "read_delta",
    "read_source", "read_text", "table_history", "table_provenance",
    "table_self_description", "write_text",
    # csv_source
    "check_source_encoding", "csv_encoding_problem", "csv_header", "read_csv_text",
    # catalog
    "PROP_LOCATION", "PROP_VERSION", "check_local_catalog", "ensure_database", "read_table", "register",
    "release_exists", "table_exists", "table_location", "uses_catalog", "with_table_names",
    # commit
    "IF_EXISTS", "SYSTEMS", "commit_release", "refuse_existing", "stamp_provenance",
    # output_state
    "LEDGER_COLUMNS", "ReleaseTarget", "check_output", "finish_output", "marker_path", "marker_text",
    "prepare_output", "release_target",
    # errors
    "is_storage_failure", "is_write_failure", "path_cause", "spark_failure_cause",
]
