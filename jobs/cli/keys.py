"""``fragrelease keys``: the data owners' Ed25519 signing keys (signed manifests; docs/known-limitations.md #7).

    fragrelease keys generate --owner NAME --out DIR    write DIR/NAME.key (0600; DIR 0700), print the public key

Registered in ``jobs/cli/__init__.py``. Spark-free: the key pair comes from :mod:`fragrelease.signing`.
"""
from __future__ import annotations

import typer

from fragrelease.validation import check_safe_name

from ._common import console


def generate(owner: str = typer.Option(..., "--owner", help="The data owner's name, as in the configuration."),
             out: str = typer.Option(..., "--out", help="Folder for NAME.key (created 0700 if missing); keep it "
                                                         "out of work_dir and output.")):
    """Create an owner's Ed25519 key pair: the private key file and the public key line for the configuration."""
    from fragrelease.signing import write_key_pair

    check_safe_name(owner, key="--owner")
    path, public = write_key_pair(out, owner)
    console.print(f"private key written to {path} (mode 0600); in the owner's configuration:", highlight=False)
    console.print(f"    signing_key: {path}", highlight=False)
    console.print("public key, for every party's configuration of this owner:", highlight=False)
    console.print(f"    public_key: {public}", highlight=False)
