"""Storage locations: local paths and URIs (s3a://, abfss://, dbfs:/, file:/) through pyarrow's file systems."""
from __future__ import annotations

import os
from urllib.parse import urlparse

import pyarrow.fs as pafs


def fs_path(uri: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow file system of ``uri`` and the path inside it (local paths made absolute)."""
    if urlparse(uri).scheme in ("", "file") and not uri.startswith("file:"):
        return pafs.LocalFileSystem(), os.path.abspath(uri)
    return pafs.FileSystem.from_uri(uri)


def absolute(uri: str) -> str:
    """Local paths made absolute; URIs (s3a://, dbfs:/, file:/) unchanged."""
    return os.path.abspath(uri) if urlparse(uri).scheme == "" else uri
