"""Test helper: a module fixture's release folder (work folder, private folders, keys, sources) copied
for one test, so tests that start from the same owners' metadata (and plan) run those steps once.

``copy_state(src, dst)`` copies the tree ``src`` into ``dst`` (modes kept). The metadata, plan,
manifests and Delta logs hold no path of their own (every path comes from the configuration and the
private root); the one file that does is the aggregator's pending-release marker
(``<output>_fragrelease_pending.json``), which names its output: the copy's names the copy's output.
"""
from __future__ import annotations

import glob
import json
import os
import shutil


def copy_state(src, dst) -> None:
    src, dst = str(src), str(dst)
    shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
    for marker in glob.glob(os.path.join(dst, "**", "*_fragrelease_pending.json"), recursive=True):
        with open(marker, encoding="utf-8") as f:
            data = json.load(f)
        assert data["output"].startswith(src + os.sep), data  # a marker of this fixture's own output
        data["output"] = dst + data["output"][len(src):]
        with open(marker, "w", encoding="utf-8") as f:
            json.dump(data, f)
