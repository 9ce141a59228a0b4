"""Test helper: give every owner of a release configuration a signing key pair (signed manifests).

``with_keys(cfg, folder)`` returns ``cfg`` with ``signing_key`` (``folder/<owner>.key``, 0600) and
``public_key`` set for every owner that has neither; keys already in ``folder`` are reused, so two
configurations built with the same folder describe the same owners.
"""
from __future__ import annotations

import os

from fragrelease.protocol.config import ReleaseConfig, config_from_dict
from fragrelease.signing import load_private_key, public_key_text, write_key_pair


def with_keys(cfg: ReleaseConfig, folder) -> ReleaseConfig:
    data = cfg.model_dump(mode="json", exclude_none=True, exclude_unset=True)  # the keys the configuration wrote
    for o in data["owners"]:
        if "signing_key" in o or "public_key" in o:
            continue
        path = os.path.join(str(folder), f"{o['name']}.key")
        if os.path.exists(path):
            pub = public_key_text(load_private_key(path, owner=o["name"]))
        else:
            path, pub = write_key_pair(str(folder), o["name"])
        o.update(signing_key=path, public_key=pub)
    return config_from_dict(data)
