"""The release kinds, registered in one place: a kind's wire name (the ``linkage`` release option) to
where its two halves live (docs/architecture.md, "Release kinds").

A kind is a plug-in of the protocol: its Spark-free half (:class:`fragrelease.protocol.kind.ReleaseKind`:
configuration checks, guarantee text, provenance terms, preview) and its Spark half
(:class:`fragrelease.jobs.protocol.kind.KindJobs`: what an owner does in each round and how the aggregator
verifies and combines) are named here as ``"module:attribute"`` and imported only when asked for, so the
protocol's modules import no kind. Adding a kind is one entry here and a folder of its own
(docs/architecture.md, "Add a release kind"). Everything here is public.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any

from fragrelease.errors import InvalidParameterError


@dataclass(frozen=True)
class KindEntry:
    """Where one kind's halves are: ``"module:attribute"`` of its Spark-free kind and of its Spark jobs, and
    of the function by which a release of the kind describes itself (Spark-free:
    :func:`fragrelease.jobs.describe.kind_text`)."""

    terms: str
    jobs: str
    describe: str


#: Every release kind by wire name, in the order the configuration's help lists them.
KINDS: dict[str, KindEntry] = {
    "linked": KindEntry("fragrelease.idpir.kind:LINKED", "fragrelease.jobs.idpir.kind:LINKED_JOBS",
                        describe="fragrelease.idpir.describe_text:release_text"),
    "unlinked": KindEntry("fragrelease.idpir.kind:UNLINKED", "fragrelease.jobs.idpir.kind:UNLINKED_JOBS",
                          describe="fragrelease.idpir.describe_text:release_text"),
    "synthetic": KindEntry("fragrelease.synthesis.kind:SYNTHETIC", "fragrelease.jobs.synthesis.kind:SYNTHETIC_JOBS",
                           describe="fragrelease.synthesis.describe_text:release_text"),
}


def resolve(dotted: str) -> Any:
    """The object ``"module:attribute"`` names (imported on first use)."""
    module, _, attribute = dotted.partition(":")
    return getattr(import_module(module), attribute)


def entry_of(name: str) -> KindEntry:
    """The registry entry of kind ``name``. Raises InvalidParameterError naming the known kinds."""
    try:
        return KINDS[name]
    except (KeyError, TypeError):
        raise InvalidParameterError(f"linkage must be one of {list(KINDS)}, not {name!r}") from None
