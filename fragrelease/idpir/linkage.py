"""What an IR release's rows are (docs/privacy.md): ``linked`` (the paper's rows, one per record) or
``unlinked`` (every column shuffled on its own), and the guarantee's ``table`` sentence of each.

The IR kinds' own modules (:mod:`fragrelease.idpir`, :mod:`fragrelease.jobs.idpir`) ask these objects
(:func:`ir_linkage`) rather than comparing a name; the protocol asks the release kind
(:func:`fragrelease.protocol.kind.release_kind`). Everything here is public.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from fragrelease.validation import registered


@dataclass(frozen=True)
class IRLinkage:
    """What an IR release's rows are.

    Attributes
    ----------
    name : the wire string (the ``linkage`` release option).
    rows_are_records : each released row is one record's values (``linked``); else every column is
        shuffled apart (``unlinked``).
    table_text : the guarantee's ``table`` sentence, with ``{epsilon}``, ``{short}`` (DP or iDP) and
        ``{composition}`` to fill (:meth:`table`).
    """

    name: str
    rows_are_records: bool
    table_text: str

    def table(self, *, epsilon: str, short: str, composition: str) -> str:
        """The guarantee's ``table`` sentence (:func:`fragrelease.idpir.guarantee.release_guarantee`)."""
        return self.table_text.format(epsilon=epsilon, short=short, composition=composition)

    @property
    def shuffles_columns(self) -> bool:
        """Every column in its own random order, the ids dropped (``unlinked``)."""
        return not self.rows_are_records


#: The paper's rows, one per record.
LINKED_ROWS = IRLinkage("linked", rows_are_records=True, table_text=(
    "linked rows (the paper's release): each row keeps its record's cluster value for every attribute, "
    "so which clusters co-occur across attributes is shown without noise; the joint table has no "
    "epsilon bound, only the per-column statements hold"))
#: Every column shuffled on its own: an ε bound on the whole table.
UNLINKED_ROWS = IRLinkage("unlinked", rows_are_records=False, table_text=(
    "unlinked: every column was shuffled independently with CSPRNG keys, so the table is a function "
    "of the noisy centroid vectors alone and is {epsilon}-{short} as a whole "
    "({composition} composition over owners, sequential over attributes)"))
#: The IR linkages by wire name.
IR_LINKAGES: Mapping[str, IRLinkage] = {x.name: x for x in (LINKED_ROWS, UNLINKED_ROWS)}


def ir_linkage(name: str) -> IRLinkage:
    """The IR linkage called ``name``.

    Raises
    ------
    InvalidParameterError
        Not an IR linkage (the message lists ``linked`` and ``unlinked``).
    """
    return registered(IR_LINKAGES, name, "linkage")
