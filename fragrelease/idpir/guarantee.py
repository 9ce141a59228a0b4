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

Hand-over (:data:`HAND_OVER`, the ``hand_over`` sentence of a release whose configuration sets
``risk_check``): the owners' risk check is advisory. Each owner measures the risk of its released rows
after its fragment and manifest are written and keeps the numbers, and the thresholds they exceed, in
its private report; no fragment is withheld or redrawn on them, so they add nothing to the release's ε
and the statements above hold unchanged. A gate that published only the draws passing a check on the
original records would make the release depend on the data outside every ε statement
(docs/privacy.md, "Measured disclosure risk and the owner's risk check").

Against whom (:func:`against_text`):

- **Release recipients** (anyone who reads the Delta table): the statements above.
- **The aggregator** reads each owner's protected fragment: the attributes with every record id
  replaced by its keyed pseudonym (HMAC-SHA-256 under the owners' shared key, with the plan id and the
  owners' nonces as context; :mod:`fragrelease.pseudonyms`), rows in a CSPRNG order, and it knows which owner wrote
  each fragment. Without the key the pseudonyms are indistinguishable from labels drawn
  independently of the data (HMAC is a pseudorandom function), so its view of each column of each
  owner's fragment is, up to that computational assumption, a function of the column's multiset:
  each is ε_attr-DP/iDP exactly as for recipients (horizontal owners: with respect to that owner's
  fragment). Linked: rows link a record's attributes within a fragment and equal pseudonyms link
  them across vertical fragments, as the linked release does: the joint view has no ε bound.
  Unlinked: owners unlink their own columns and write the pseudonym set apart, so the whole view is
  ε-DP/iDP (Σ ε_j over vertical owners; parallel over horizontal ones). The owner of origin of each
  row is shown (horizontal: which owner holds a record, which no statement protects). Vertical: an
  owner's metadata carries the digest of its pseudonymised id set (context ``metadata``), and a
  horizontal owner's metadata round writes the keyed digests of its ids (context ``metadata``) for
  the disjointness check: both are the same in every release under a configured key kept across
  releases (docs/privacy.md, "What the metadata digests let κ link"). Across releases: every
  release's owners draw fresh nonces, so its pseudonyms are new even when an aggregator reuses a
  plan id under an unchanged key.
- **Every key holder** maps every pseudonym back to its record id. Every owner holds the key (a
  vertical owner also knows every record id), so any owner who can read ``work_dir`` can do it
  alone, as can the aggregator colluding with one owner. In a single-command run
  (``fragrelease run``, ``Release.run()``) one process plays every party and generates the key:
  that process holds it beside the aggregator's view. Linked: a key holder sees which identified
  records share a cluster, as the aggregator did when fragments carried ids: no ε bound, not even
  for one column of another owner's fragment. Unlinked: it learns every owner's set of record ids;
  the other owners' columns stay multisets with their ε statements. With ``keep_id: true`` the same
  holds against any key holder who reads the release.
- **Membership** (:func:`membership_sentence`, the end of every ``against`` text): no ε covers who
  is in which fragment. Every owner holds the key and can read ``work_dir/metadata/ids/``, so each
  owner learns exactly which ids every other horizontal owner holds; under a key kept across
  releases the aggregator links each owner's id set between releases.
"""
from __future__ import annotations

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.linkage import IR_LINKAGES, ir_linkage
from fragrelease.idpir.mechanisms import get_mechanism
from fragrelease.protocol.fragmentation import fragmentation_of
from fragrelease.protocol.membership import HORIZONTAL_MEMBERSHIP, VERTICAL_MEMBERSHIP, membership_sentence

#: The ``hand_over`` sentence of a release whose owners run the advisory risk check (``risk_check``).
HAND_OVER = ("every owner hands its protected fragment over whatever its risk check measures: the check runs after "
             "the fragment and its manifest are written, and its measured risks and flags go to that owner's private "
             "report only, so the statements above hold unchanged and nothing is added to epsilon; the records each "
             "owner holds out as its control set are not released. Another release asked for after reading that "
             "report is another spend (a ledger records it), and the choice to ask for it is outside every epsilon "
             "statement")

#: The IR linkages (:data:`fragrelease.idpir.linkage.IR_LINKAGES`); the synthetic kind states its own
#: guarantee (:func:`fragrelease.synthesis.kind.synthetic_guarantee`).
LINKAGES = tuple(IR_LINKAGES)
#: The membership sentences, stated by every kind (:mod:`fragrelease.protocol.membership`).
__all__ = ["HAND_OVER", "HORIZONTAL_MEMBERSHIP", "LINKAGES", "VERTICAL_MEMBERSHIP", "against_text", "membership_sentence",
           "release_guarantee"]


def against_text(*, short: str, linkage: str, epsilon: str = "epsilon", keep_id: bool = False,
                 fragmentation: str = "horizontal", single_process: bool = False) -> str:
    """The ``against`` sentence: recipients, the aggregator, every key holder (module docstring).

    ``single_process``: one process played every party (``fragrelease run``, ``Release.run()``): it
    generated the pseudonym key and held it together with the aggregator's view, so the text does
    not say the aggregator lacks the key. ``fragmentation``: vertical releases add that the owners'
    id-set digest is the same in every release under one key.
    """
    if ir_linkage(linkage).rows_are_records:
        view = (f"each column of each owner's fragment, as a multiset, is eps_attr-{short} as for recipients, up to "
                "HMAC-SHA-256 being a pseudorandom function; its rows are linked within a fragment and, through equal "
                "pseudonyms, across vertical owners, so its joint view has no epsilon bound")
        coalition = ("maps the pseudonyms of every owner's fragment back to record ids and sees which identified "
                     "records share a cluster: no epsilon bound, not even for one column of another owner's fragment")
    else:
        view = (f"owners unlinked their own columns and wrote their pseudonym sets apart, so its whole view is "
                f"{epsilon}-{short} as the release is, up to HMAC-SHA-256 being a pseudorandom function")
        coalition = ("learns every owner's set of record ids; the other owners' columns stay multisets with their "
                     "epsilon statements")
    if single_process:
        holder = ("In this release one process played every party: it generated the pseudonym key and held it "
                  "beside the aggregator's view, so that process, and anyone who reads its private folders, holds the "
                  "key")
    else:
        holder = ("The aggregator does not hold the key unless an owner gives it or shares its machine or process")
    keyholders = (f"Every key holder {coalition}. Every owner holds the key (a vertical owner also knows every record "
                  "id), so any owner who can read work_dir, where every owner's protected fragment lies, can do this "
                  "alone, as can the aggregator colluding with one owner")
    digest = fragmentation_of(fragmentation).guarantee_sentence()
    published = ("; the release publishes the pseudonyms (keep_id), so every key holder who reads it maps them back "
                 "to record ids, and against such a reader no epsilon bound holds" if keep_id else "")
    return ("release recipients: the statements above. The aggregator: it reads each owner's protected fragment with "
            "record ids replaced by keyed pseudonyms (HMAC-SHA-256 under the key the owners share; new for every "
            "release: its context is the plan id with every owner's nonce) in a random row order, and which owner wrote it (horizontal: which owner holds each row, which "
            f"no statement protects); {view}{digest}. {holder}. {keyholders}{published}. "
            f"{membership_sentence(fragmentation)}")


def release_guarantee(*, mechanism: str, epsilon: str, composition: str, linkage: str, category_order: str,
                      keep_id: bool = False, fragmentation: str = "horizontal", single_process: bool = False,
                      risk_check: bool = False) -> dict:
    """The guarantee of a release as a dict of plain sentences (for provenance, reports and the CLI).

    ``fragmentation`` and ``single_process`` shape the ``against`` sentence (:func:`against_text`).
    ``risk_check``: the release's configuration sets ``risk_check`` (the owners' advisory risk check).

    Keys: ``neighbouring``, ``notion``, ``per_column``, ``table``, ``against``, and with ``risk_check``
    ``hand_over`` (:data:`HAND_OVER`; not for a synthetic release, which refuses ``risk_check``).

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
                  "(iDP-IR: the noise scale uses the fragment's local sensitivity; plain iDP is k = 1). This is the "
                  "iDP of Soria-Comas et al. (IEEE TIFS 2017): neighbours of the actual dataset only, one epsilon "
                  "for every person; not personalised DP with per-person budgets")
    order = ("categories ranked by a Laplace histogram paid from the attribute's budget (dp-frequency)"
             if category_order == "dp-frequency" else "categories ranked in their declared, public order")
    per_column = (f"each released column, as a multiset, is eps_attr-{short} for its attribute's budget eps_attr "
                  f"(see each owner's budgets); {order}")
    table = ir_linkage(linkage).table(epsilon=epsilon, short=short, composition=composition)
    statement = {
        "neighbouring": "substitution of one record; the number of records is public",
        "notion": notion,
        "per_column": per_column,
        "table": table,
        "against": against_text(short=short, linkage=linkage, epsilon=epsilon, keep_id=keep_id,
                                fragmentation=fragmentation, single_process=single_process),
    }
    if risk_check:
        statement["hand_over"] = HAND_OVER
    return statement
