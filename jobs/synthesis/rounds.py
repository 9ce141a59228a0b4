"""What a party says when an owner's synthesis round is not there yet (``linkage: synthetic``; docs/protocol.md).

Each owner's ``protect`` step runs three times: the first run writes ``synthesis-round-1.json`` (its
key-agreement key), each later run, once every owner has written the round before,
``synthesis-round-2.json`` and ``synthesis-round-3.json`` (:mod:`.owner`). A party that needs a round an
owner has not written yet (an owner's round n needs every owner's round n − 1; the aggregator's release
step needs every round of every owner) refuses with one line naming the owner, the round, the plan, the
path and the command that owner runs next (:func:`missing_round`).
"""
from __future__ import annotations

from fragrelease.errors import ConfigError

_ORDINAL = {1: "one", 2: "two", 3: "three"}


def missing_round(party: str, owner: str, number: int, plan_id: str, path: str) -> ConfigError:
    """The error for owner ``owner``'s synthesis round ``number`` (1, 2 or 3) of plan ``plan_id`` missing at ``path``.

    ``party`` is the refusing party as its messages start (``aggregator``, ``owner 'a'``). Returns,
    does not raise, so the caller's ``raise`` shows where it was refused.
    """
    run = f"'fragrelease owner protect --config CONFIG --owner {owner}'"
    then = (f"owner {owner!r} runs {run} first" if number == 1 else
            f"owner {owner!r} runs {run} again once every owner has written round {_ORDINAL[number - 1]}")
    return ConfigError(f"{party}: owner {owner!r} has not written its synthesis round {_ORDINAL[number]} for plan "
                       f"{plan_id} yet ({path!r} does not exist); {then}")
