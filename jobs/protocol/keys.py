"""Where an owner's pseudonym key comes from (docs/privacy.md, "Against the aggregator").

1. ``pseudonym_key`` in the owner's configuration (``{file: PATH}`` or ``{env: VAR}``): that key.
2. Otherwise the release's generated key file, ``pseudonym-key`` (mode 0600, folder 0700):

   - in the release's shared private root ``$FRAGRELEASE_PRIVATE_ROOT/<release>/pseudonym-key``
     when no owner sets a ``private_dir`` (every party on one machine, one private root);
   - else in each owner's ``private_dir``.

   ``fragrelease run`` and ``Release.run()`` play every party on one machine: they write a fresh
   key there for every release (:func:`generate_release_key`), so a single-command release needs
   no setting. A separate owner command (``fragrelease owner metadata|protect``) uses the file if it
   exists; in the shared-root case the first owner step creates it atomically (the others read it);
   with owners' own ``private_dir`` and no configured key it refuses: the owners of separate
   machines must agree on a key, which fragrelease cannot do for them.

Keys never go under ``work_dir`` or ``output`` (the configuration refuses a key file there).
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from fragrelease.errors import PseudonymKeyError
from fragrelease.protocol.config import ReleaseConfig
from fragrelease.pseudonyms import new_key_text, read_key_env, read_key_file, write_key_file

from .layout import KEY_FILE, generated_key_path, shared_private_root

__all__ = ["KEY_FILE", "check_pseudonym_key", "generate_release_key", "generated_key_path", "owner_pseudonym_key",
           "shared_private_root"]

if TYPE_CHECKING:  # the context is built from this module's paths (context imports keys, not the reverse)
    from .context import OwnerContext

def generate_release_key(cfg: ReleaseConfig) -> list[str]:
    """Write one fresh key (CSPRNG, :func:`fragrelease.pseudonyms.new_key_text`) for this release
    to the key file of every owner without a configured ``pseudonym_key``; returns the paths written.

    Called by the single-command release only (:func:`fragrelease.jobs.protocol.release.play_release`), which plays every party.
    """
    key = new_key_text()
    holders: dict[str, list[str]] = {}
    for o in cfg.owners:
        if o.pseudonym_key is None:
            holders.setdefault(generated_key_path(cfg, o), []).append(o.name)
    for path, names in sorted(holders.items()):
        write_key_file(path, key, owner=", ".join(names))
    return sorted(holders)


def check_pseudonym_key(ctx: OwnerContext, *, generated: bool) -> None:
    """Refuse, before Spark starts, an owner whose key cannot be found (no data needed).

    ``ctx``: the owner's context (:func:`fragrelease.jobs.protocol.context.owner_context`).
    ``generated``: the single-command release, which writes the release key itself, so only a
    configured key is read here. Otherwise (an owner step alone) a missing generated key is refused
    unless the owners share one private root (the step then creates it).

    Raises
    ------
    PseudonymKeyError
        As :func:`owner_pseudonym_key`.
    """
    if ctx.owner.pseudonym_key is not None or not generated and not ctx.shares_key_root:
        owner_pseudonym_key(ctx)


def owner_pseudonym_key(ctx: OwnerContext) -> bytes:
    """The owner's pseudonym key: 32 bytes derived with HKDF-SHA-256 from the configured or generated secret
    (:func:`fragrelease.pseudonyms.derive_key`); see the module docstring for where it comes from.
    ``ctx``: the owner's context (its configured key, or the generated key file ``ctx.paths.generated_key``).

    Raises
    ------
    PseudonymKeyError
        The configured file cannot be read or is readable by group or others, the variable is not
        set, the secret is shorter than 32 bytes, or no key is configured and none was generated for
        this release; each names the owner and where it looked.
    """
    owner = ctx.owner
    if owner.pseudonym_key is not None:
        if owner.pseudonym_key.file is not None:
            return read_key_file(owner.pseudonym_key.file, owner=owner.name)
        return read_key_env(str(owner.pseudonym_key.env), owner=owner.name)
    path = ctx.paths.generated_key
    if not os.path.exists(path) and ctx.shares_key_root:
        write_key_file(path, new_key_text(), exclusive=True, owner=owner.name)  # loses cleanly to a concurrent owner step
    if not os.path.exists(path):
        raise PseudonymKeyError(
            f"owner {owner.name!r} has no pseudonym_key in its configuration and no generated release key at "
            f"{path!r}; name the key the owners share ({{file: PATH}} or {{env: VAR}})")
    return read_key_file(path, owner=owner.name)
