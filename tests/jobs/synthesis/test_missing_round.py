"""A synthesis round an owner has not written yet (issue 49, item 6.4): the aggregator's release step says
which owner, which round, which plan and what that owner runs next, in one line, before Spark starts."""
from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from fragrelease.errors import ConfigError
from fragrelease.jobs.protocol.context import aggregator_context
from fragrelease.jobs.protocol.layout import read_message
from fragrelease.jobs.synthesis.aggregator import check_rounds_written, synthesize
from fragrelease.jobs.synthesis.messages import round_path
from fragrelease.protocol.config import config_from_dict
from fragrelease.synthesis.protocol import MaskedMessage


def _ctx(tmp_path):
    cfg = config_from_dict(dict(
        name="s", dataset="adult-income", fragmentation="horizontal", epsilon="1", linkage="synthetic",
        synthesis_target="income", owners=[{"name": "bank-a", "rows": 50}, {"name": "bank-b", "rows": 50}],
        work_dir=str(tmp_path / "work"), output=str(tmp_path / "release")))
    plan = SimpleNamespace(plan_id="p-123", owners=[SimpleNamespace(name="bank-a"), SimpleNamespace(name="bank-b")])
    return aggregator_context(cfg), plan


def _touch(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").write("{}")


def test_a_missing_round_two_names_the_owner_the_plan_and_the_command(tmp_path):
    ctx, plan = _ctx(tmp_path)
    for name in ("bank-a", "bank-b"):
        _touch(round_path(ctx.owners[name], 1))
    _touch(round_path(ctx.owners["bank-a"], 2))
    _touch(round_path(ctx.owners["bank-a"], 3))
    missing = round_path(ctx.owners["bank-b"], 2)
    with pytest.raises(ConfigError) as info:
        check_rounds_written(ctx, plan)
    assert str(info.value) == (
        f"aggregator: owner 'bank-b' has not written its synthesis round two for plan p-123 yet ({missing!r} does not "
        "exist); owner 'bank-b' runs 'fragrelease owner protect --config CONFIG --owner bank-b' again once every owner "
        "has written round one")
    with pytest.raises(ConfigError, match="^aggregator: owner 'bank-b' has not written its synthesis round two"):
        synthesize(None, ctx, plan)  # the release step's own path: before any key, message or Spark
    _touch(missing)
    with pytest.raises(ConfigError, match="^aggregator: owner 'bank-b' has not written its synthesis round three.* "
                                          "again once every owner has written round two$"):
        check_rounds_written(ctx, plan)
    _touch(round_path(ctx.owners["bank-b"], 3))
    check_rounds_written(ctx, plan)  # every round of both owners: nothing to say


def test_a_missing_round_one_comes_first(tmp_path):
    ctx, plan = _ctx(tmp_path)
    _touch(round_path(ctx.owners["bank-a"], 1))
    _touch(round_path(ctx.owners["bank-a"], 2))
    with pytest.raises(ConfigError, match=r"^aggregator: owner 'bank-b' has not written its synthesis round one for "
                                          r"plan p-123 yet \(.*\); owner 'bank-b' runs 'fragrelease owner protect "
                                          r"--config CONFIG --owner bank-b' first$"):
        check_rounds_written(ctx, plan)


def test_a_missing_protocol_message_is_named_as_not_written_yet(tmp_path):
    path = str(tmp_path / "owners" / "bank-b" / "synthesis-round-2.json")
    with pytest.raises(ConfigError) as info:
        read_message(MaskedMessage, path, party="aggregator", what="synthesis round two of owner 'bank-b'")
    assert str(info.value) == (f"aggregator: synthesis round two of owner 'bank-b' {path!r} does not exist: it has not "
                               "been written yet")
