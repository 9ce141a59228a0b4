"""Vendored public datasets (Adult, Wine Quality) with checksums; see README.md in this folder."""
