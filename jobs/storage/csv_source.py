"""CSV fragments read as text, without Spark's schema-inference passes.

``spark.read.csv(path, header=True, inferSchema=True)`` runs two Spark jobs before anything else:
one reads the first line for the column names, one reads **every row** to guess the types. An
owner's fragment has a declared schema, and the owner validates every value against it anyway
(:func:`fragrelease.jobs.idpir.fragment.validate_fragment`, which names a bad value as written), so
the columns can be read as strings: :func:`csv_header` reads the first line of the source's first
file on the driver, and :func:`read_csv_text` hands Spark a schema of that many string columns,
with ``enforceSchema=false`` so Spark checks each file's header against those names as it reads.
Nothing is cached: the header is read again at every read, so a changed file is never read with a
stale schema. Anything this reader cannot tell for sure (a glob, options other than the separator,
the quote, the escape and ``multiLine``, no header, a quoted header line, an unreadable path) leaves
the read to Spark's inference, as before.

Both reads follow RFC 4180 (:data:`RFC4180_OPTIONS`): a field in double quotes may hold the
separator, a line break, and a double quote written twice (the field ``"Müller, ""quoted"" here"`` is the
value ``Müller, "quoted" here``). Spark's own defaults differ (its escape character is a backslash, and a
quoted line break would split the record), so the reader sets ``escape='"'`` and
``multiLine=true``; an owner may set either in its source options. ``multiLine`` reads each file in
one task (a file is not split): the cost of reading a quoted line break right.
"""
from __future__ import annotations

import csv
import posixpath
from typing import Mapping, Optional

from .uris import fs_path

#: The options :func:`csv_header` understands; any other option leaves the read to Spark's inference.
HEADER_OPTIONS = frozenset({"header", "sep", "delimiter", "quote", "escape", "multiLine"})
#: Spark CSV options that read RFC 4180 (doubled quotes, quoted separators and line breaks); a source's
#: own options take precedence.
RFC4180_OPTIONS = {"quote": '"', "escape": '"', "multiLine": "true"}
_MAX_HEADER_BYTES = 1 << 20
_HEADER_CHUNK = 8192


def csv_header(path: str, options: Mapping[str, str]) -> Optional[list[str]]:
    """The column names in the first line of ``path``'s first CSV file (a file, or a folder of files
    as Spark lists them: not starting with ``_`` or ``.``, the first by name), or ``None`` when this
    reader cannot be sure of them (see the module docstring). Never raises."""
    opts = {k: str(v) for k, v in options.items()}
    if set(opts) - HEADER_OPTIONS or opts.get("header", "true").lower() != "true" or any(c in path for c in "*?[{"):
        return None
    sep = opts.get("sep", opts.get("delimiter", ","))
    quote = opts.get("quote", '"')
    if len(sep) != 1 or len(quote) != 1:
        return None
    try:
        import pyarrow.fs as pafs

        fs, p = fs_path(path)
        info = fs.get_file_info(p)
        if info.type == pafs.FileType.Directory:
            files = sorted(f.path for f in fs.get_file_info(pafs.FileSelector(p))
                           if f.type == pafs.FileType.File and not posixpath.basename(f.path).startswith(("_", ".")))
            if not files:
                return None
            p = files[0]
        elif info.type != pafs.FileType.File:
            return None
        head = b""
        with fs.open_input_stream(p) as f:  # up to the first line break: no more of the rows than needed
            while b"\n" not in head and len(head) < _MAX_HEADER_BYTES:
                chunk = f.read(_HEADER_CHUNK)
                if not chunk:
                    break
                head += chunk
        line_bytes, newline, _ = head.partition(b"\n")
        if not newline and len(head) >= _MAX_HEADER_BYTES:
            return None
        line = line_bytes.decode("utf-8-sig").rstrip("\r")
    except Exception:  # noqa: BLE001 - any doubt leaves the read to Spark's own inference
        return None
    if quote in line:  # a quoted name may hold the separator or a line break: let Spark parse it
        return None
    names = next(csv.reader([line], delimiter=sep, quotechar=quote), [])
    if not names or any(not n for n in names) or len(set(names)) != len(names):
        return None
    return names


def read_csv_text(spark, path: str, options: Optional[Mapping[str, str]] = None):
    """A CSV source with every column as a string (no inference pass), or ``None`` when
    :func:`csv_header` cannot tell its columns (the caller then reads it with inference).

    Shapes: the columns of the header, in its order, all ``string``; one row per record; an empty
    field is null. Spark checks every file's header against those names (``enforceSchema=false``) and
    fails the read naming the file when one differs. Quoted fields are read as RFC 4180 says
    (:data:`RFC4180_OPTIONS`, unless the source's options say otherwise).
    """
    from pyspark.sql import types as T

    opts = {**RFC4180_OPTIONS, **dict(options or {})}
    names = csv_header(path, opts)
    if names is None:
        return None
    schema = T.StructType([T.StructField(n, T.StringType()) for n in names])
    return spark.read.options(**{**opts, "header": "true", "enforceSchema": "false"}).schema(schema).csv(path)
