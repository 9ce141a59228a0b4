"""The printed guarantee names every party that can de-pseudonymise (issue 36 item 7).

On 0.8.4 the ``against`` sentence said the aggregator "never holds" the key, even in a
single-command run whose one process generated it; it named the aggregator colluding with one owner
as the only key holder, though every owner holds the key and can read ``work_dir``; it did not say
that a vertical owner's id-set digest is the same in every release under one key.
"""
import pytest

from fragrelease.idpir.guarantee import against_text, release_guarantee
from fragrelease.protocol.kind import release_kind


def _against(**kw):
    """The ``against`` sentence of the kind named ``linkage`` (default linked), as its release states it."""
    args = dict(mechanism="idp-ir", epsilon="1", composition="parallel", linkage="linked",
                category_order="dp-frequency")
    args.update(kw)
    return release_kind(args.pop("linkage")).guarantee(**args)["against"]


@pytest.mark.parametrize("linkage", ["linked", "unlinked"])
def test_every_owner_who_reads_work_dir_is_named_as_a_key_holder(linkage):
    text = _against(linkage=linkage)
    assert ("Every key holder " in text and "Every owner holds the key (a vertical owner also knows every record id), "
            "so any owner who can read work_dir, where every owner's protected fragment lies, can do this alone, as "
            "can the aggregator colluding with one owner") in text
    assert "never holds" not in text


def test_the_single_command_run_says_its_process_holds_the_key():
    separate, single = _against(single_process=False), _against(single_process=True)
    assert ("In this release one process played every party: it generated the pseudonym key and held it beside the "
            "aggregator's view, so that process, and anyone who reads its private folders, holds the key") in single
    assert "does not hold the key" not in single and "never holds" not in single
    assert ("The aggregator does not hold the key unless an owner gives it or shares its machine or process"
            in separate)
    assert "one process played every party" not in separate


def test_the_vertical_id_digest_is_said_to_be_stable_under_one_key():
    vertical = _against(fragmentation="vertical", composition="sequential")
    assert ("a vertical owner's metadata carries a digest of its pseudonymised id set that is the same in every "
            "release under one key, so the aggregator sees which releases under one key cover the same records"
            in vertical)
    assert "pseudonymised id set" not in _against(fragmentation="horizontal")


MEMBERSHIP_HORIZONTAL = (
    "Membership is not protected: every owner holds the pseudonym key and can read work_dir, so each owner learns "
    "exactly which record ids every other horizontal owner holds (the keyed digests of its ids in "
    "work_dir/metadata/ids/ under the key the owners share and, in a microaggregation release, the keyed pseudonyms "
    "of its protected fragment); under a configured key kept across releases those digests are the same in every "
    "release, so the aggregator links each owner's id set between releases. No epsilon covers who is in which "
    "fragment")


@pytest.mark.parametrize("linkage", ["linked", "unlinked", "synthetic"])
@pytest.mark.parametrize("single_process", [False, True])
def test_every_horizontal_guarantee_states_the_membership_exposure(linkage, single_process):
    """Issue 49 item 4: the printed guarantee says each owner learns which ids every other owner holds."""
    text = _against(linkage=linkage, single_process=single_process)
    assert MEMBERSHIP_HORIZONTAL in text  # fails if the sentence disappears or is weakened


def test_the_vertical_guarantee_states_its_membership_exposure():
    text = _against(fragmentation="vertical", composition="sequential")
    assert ("Membership is not protected: vertical owners hold the same record ids (the plan checks it), so each owner "
            "knows every other owner's id set, and under a configured key kept across releases the aggregator links "
            "that id set between releases") in text


def test_the_idp_notion_is_the_papers_not_personalised_dp():
    notion = release_guarantee(mechanism="idp-ir", epsilon="1", composition="parallel", linkage="linked",
                               category_order="dp-frequency")["notion"]
    assert "Soria-Comas et al. (IEEE TIFS 2017)" in notion and "not personalised DP" in notion


def test_linked_key_holders_see_clusters_unlinked_ones_learn_id_sets():
    linked = against_text(short="iDP", linkage="linked")
    unlinked = against_text(short="iDP", linkage="unlinked")
    assert ("maps the pseudonyms of every owner's fragment back to record ids and sees which identified records share "
            "a cluster: no epsilon bound") in linked
    assert "learns every owner's set of record ids" in unlinked
    assert "keep_id" in against_text(short="iDP", linkage="linked", keep_id=True)


def test_the_single_command_release_records_the_single_process_statement(tmp_path):
    """The provenance a single-command run commits carries the single-process text (what the CLI prints)."""
    from fragrelease.protocol.messages import OwnerMetadata, make_plan
    from fragrelease.schemas.adult import SCHEMA

    pytest.importorskip("pyspark")
    from fragrelease.jobs.protocol.aggregator import provenance

    metas = [OwnerMetadata(owner=o, dataset="adult", fragmentation="horizontal", n_records=10, id_column="record_id",
                           attributes=tuple(a.public_spec() for a in SCHEMA.protected)) for o in ("a", "b")]
    plan = make_plan(metas, fragmentation="horizontal", mechanism="idp-ir", k=3, epsilon="1")
    assert "one process played every party" in provenance(plan, single_process=True)["guarantee"]["against"]
    assert "one process played every party" not in provenance(plan)["guarantee"]["against"]


def test_the_idp_ir_noise_scale_depends_on_the_data_and_the_dp_ir_scale_does_not():
    """docs/privacy.md, "What is never published": Δ is not published, but the iDP-IR release's
    noise scale is Δ/ε of the fragment's own values, so the release carries information about it."""
    import numpy as np

    from fragrelease.idpir.mechanisms import sensitivity

    narrow = np.array([40.0, 41, 42, 43, 44, 45, 46, 47, 48])
    wide = np.array([0.0, 41, 42, 43, 44, 45, 46, 47, 100])
    assert sensitivity("idp-ir", narrow, 3, 0, 100) != sensitivity("idp-ir", wide, 3, 0, 100)
    assert sensitivity("dp-ir", narrow, 3, 0, 100) == sensitivity("dp-ir", wide, 3, 0, 100)
