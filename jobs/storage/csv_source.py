"""CSV fragments read as text, without Spark's schema-inference passes.

``spark.read.csv(path, header=True, inferSchema=True)`` runs two Spark jobs before anything else:
one reads the first line for the column names, one reads **every row** to guess the types. An
owner's fragment has a declared schema, and the owner validates every value against it anyway
(:func:`fragrelease.jobs.protocol.fragment.validate_fragment`, which names a bad value as written), so
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


def _first_file(path: str):
    """``(filesystem, path)`` of ``path``'s first CSV file as Spark lists them (a file, or a folder's first
    file by name not starting with ``_`` or ``.``), or ``None`` (no such file, a glob). May raise
    (an unreadable path): callers catch."""
    import pyarrow.fs as pafs

    if any(c in path for c in "*?[{"):
        return None
    fs, p = fs_path(path)
    info = fs.get_file_info(p)
    if info.type == pafs.FileType.Directory:
        files = sorted(f.path for f in fs.get_file_info(pafs.FileSelector(p))
                       if f.type == pafs.FileType.File and not posixpath.basename(f.path).startswith(("_", ".")))
        return (fs, files[0]) if files else None
    return (fs, p) if info.type == pafs.FileType.File else None


#: Byte-order marks of the encodings Spark's CSV reader does not read by default (UTF-32 before UTF-16:
#: ``FF FE 00 00`` starts with UTF-16's ``FF FE``).
_BOMS = ((b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe\x00\x00", "UTF-32"), (b"\xfe\xff", "UTF-16"),
         (b"\xff\xfe", "UTF-16"))
#: File name endings Spark decompresses (their bytes are not text): not sniffed.
_COMPRESSED = (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst", ".xz", ".zip")
_SNIFF_BYTES = 4096


def csv_encoding_problem(path: str, options: Mapping[str, str]) -> Optional[str]:
    """Why ``path``'s first CSV file (as :func:`csv_header` picks it) is not the UTF-8 text Spark reads, as
    the end of a sentence (``the file`` or, in a folder, ``its file 'part-0.csv'``), or ``None``.

    Spark reads a CSV source as UTF-8 unless its options name another ``encoding`` (or ``charset``):
    a UTF-16 or UTF-32 file then reads as one column whose name is full of ``\\x00``. Checked on
    the first 4 KiB of the file, on the driver (no Spark job): a UTF-16 or UTF-32 byte-order mark
    (``the file is UTF-16 (byte-order mark); save it as UTF-8``), or NUL bytes in the first
    line (UTF-16 or UTF-32 without a mark). ``None`` when the options name an encoding, for a glob,
    a compressed file, a path that cannot be read (Spark's read then says why) and for text without
    either sign. Never raises.
    """
    if any(str(k).lower() in ("encoding", "charset") for k in options):
        return None
    try:
        first = _first_file(path)
        if first is None or first[1].lower().endswith(_COMPRESSED):
            return None
        fs, p = first
        first_given = fs_path(path)[1]
        with fs.open_input_stream(p) as f:
            head = f.read(_SNIFF_BYTES)
    except Exception:  # noqa: BLE001 - an unreadable path: Spark's read says why
        return None
    name = "the file" if p == first_given else f"its file {posixpath.basename(p)!r}"
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return f"{name} is {encoding} (byte-order mark); save it as UTF-8"
    if b"\x00" in head.split(b"\n", 1)[0]:
        return (f"{name} holds NUL bytes in its first line, as UTF-16 or UTF-32 text does; save it as UTF-8 "
                "(or name its encoding in the source's options)")
    return None


def check_source_encoding(source: object, where: str) -> None:
    """Refuse a CSV source that is not UTF-8 text before Spark reads it (:func:`csv_encoding_problem`; no
    Spark job). ``source`` is a :class:`fragrelease.protocol.config.SourceConfig` (anything but a CSV path
    passes); ``where`` starts the message (``owner 'clinic-a' (source /data/a.csv)``).

    Raises
    ------
    SchemaMismatchError
        ``owner 'clinic-a' (source /data/a.csv): the file is UTF-16 (byte-order mark); save it as UTF-8``.
    """
    from fragrelease.errors import SchemaMismatchError

    path = getattr(source, "path", None)
    if getattr(source, "format", None) != "csv" or getattr(source, "table", None) is not None or not path:
        return
    problem = csv_encoding_problem(str(path), dict(getattr(source, "options", None) or {}))
    if problem is not None:
        raise SchemaMismatchError(f"{where}: {problem}")


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
        first = _first_file(path)
        if first is None:
            return None
        fs, p = first
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
