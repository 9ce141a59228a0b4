"""Who is in which fragment: the membership exposure every release kind states at the end of its
``against`` sentence (docs/privacy.md, "What is public"; issue 49 item 4).

Every kind's owners share the pseudonym key and write the keyed digests of their ids in the metadata
round, so no ε covers membership whatever the kind releases. Everything here is public.
"""
from __future__ import annotations

from fragrelease.protocol.fragmentation import fragmentation_of

#: The membership exposure of every release whose owners share the pseudonym key (issue 49 item 4;
#: docs/privacy.md, "What is public"), until a private set-intersection protocol replaces the id digests.
HORIZONTAL_MEMBERSHIP = (
    "Membership is not protected: every owner holds the pseudonym key and can read work_dir, so each owner learns "
    "exactly which record ids every other horizontal owner holds (the keyed digests of its ids in "
    "work_dir/metadata/ids/ under the key the owners share and, in a microaggregation release, the keyed pseudonyms "
    "of its protected fragment); under a configured key kept across releases those digests are the same in every "
    "release, so the aggregator links each owner's id set between releases. No epsilon covers who is in which "
    "fragment")
VERTICAL_MEMBERSHIP = (
    "Membership is not protected: vertical owners hold the same record ids (the plan checks it), so each owner "
    "knows every other owner's id set, and under a configured key kept across releases the aggregator links that "
    "id set between releases. No epsilon covers who is in the dataset")


def membership_sentence(fragmentation: str = "horizontal") -> str:
    """The membership exposure of a release of ``fragmentation`` (the end of every ``against`` text).

    Horizontal: :data:`HORIZONTAL_MEMBERSHIP`; vertical: :data:`VERTICAL_MEMBERSHIP`. Raises
    InvalidParameterError for an unknown fragmentation.
    """
    return HORIZONTAL_MEMBERSHIP if fragmentation_of(fragmentation).name == "horizontal" else VERTICAL_MEMBERSHIP
