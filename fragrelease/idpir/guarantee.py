"""The exact privacy statement of a release, from its public parameters (docs/privacy.md; docs/specification.md §2).

One function writes the statement that the release's provenance (``guarantee``), the public
report and the CLI summary all show, so they cannot drift apart. It reads only public parameters
(mechanism, ε, composition, linkage, the category order), never data.

What holds (neighbouring datasets differ by the substitution of one record; n is public):

- **Per column.** Each released column, as a multiset of values, is a function of that attribute's
  noisy centroid vector (and, for a categorical attribute, of its category order) and of the public
  cluster sizes. It is ε_attr-differentially private (DP-IR) or ε_attr-individually differentially
  private with respect to the owner's actual fragment (iDP-IR, plain iDP), where ε_attr is the
  attribute's whole budget: the ``dp-frequency`` category histogram and the centroids compose
  sequentially within it.
- **Linked table** (``linkage: linked``, the paper's release). Every row keeps its record's cluster
  value for every attribute, so the table also shows, without noise, which clusters co-occur across
  attributes. That joint structure has no ε bound: a single substitution can produce a table that is
  impossible under the original dataset. Only the per-column statements hold.
- **Unlinked table** (``linkage: unlinked``). Every column is shuffled on its own with CSPRNG keys
  before the commit, so the table is a function of the noisy centroid vectors alone: the whole
  table is ε-DP (ε-iDP) by sequential composition over attributes (vertical owners add up, Σ ε_j)
  and parallel composition over horizontal owners' disjoint records.

Against whom: release recipients (anyone who reads the Delta table). The aggregator additionally
sees each owner's protected fragment with record ids and linked rows, so against the aggregator
only the per-column statements hold, whatever the linkage.
"""
from __future__ import annotations

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.mechanisms import get_mechanism

#: Linkages of a combined release (docs/specification.md §2).
LINKAGES = ("linked", "unlinked")


def release_guarantee(*, mechanism: str, epsilon: str, composition: str, linkage: str, category_order: str) -> dict:
    """The guarantee of a release as a dict of plain sentences (for provenance, reports and the CLI).

    Keys: ``neighbouring``, ``notion``, ``per_column``, ``table``, ``against``.

    Raises
    ------
    InvalidParameterError
        Unknown mechanism or linkage.
    """
    if linkage not in LINKAGES:
        raise InvalidParameterError(f"linkage must be one of {LINKAGES}, not {linkage!r}")
    short = get_mechanism(mechanism).notion
    if short == "DP":
        notion = "differential privacy (DP-IR: global sensitivity (hi - lo)/k from the declared domain)"
    else:
        notion = ("individual differential privacy with respect to each owner's actual fragment "
                  "(iDP-IR: the noise scale uses the fragment's local sensitivity; plain iDP is k = 1)")
    order = ("categories ranked by a Laplace histogram paid from the attribute's budget (dp-frequency)"
             if category_order == "dp-frequency" else "categories ranked in their declared, public order")
    per_column = (f"each released column, as a multiset, is eps_attr-{short} for its attribute's budget eps_attr "
                  f"(see each owner's budgets); {order}")
    if linkage == "linked":
        table = ("linked rows (the paper's release): each row keeps its record's cluster value for every attribute, "
                 "so which clusters co-occur across attributes is shown without noise; the joint table has no "
                 "epsilon bound, only the per-column statements hold")
    else:
        table = (f"unlinked: every column was shuffled independently with CSPRNG keys, so the table is a function "
                 f"of the noisy centroid vectors alone and is {epsilon}-{short} as a whole "
                 f"({composition} composition over owners, sequential over attributes)")
    return {
        "neighbouring": "substitution of one record; the number of records is public",
        "notion": notion,
        "per_column": per_column,
        "table": table,
        "against": ("release recipients; the aggregator also sees each owner's protected fragment with ids and "
                    "linked rows, so against it only the per-column statements hold"),
    }
