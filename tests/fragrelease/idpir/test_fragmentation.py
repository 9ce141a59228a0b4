"""Fragmentations and linkages as objects (fragrelease.protocol.fragmentation, fragrelease.idpir.linkage, the release
kinds of fragrelease.kinds): the registries and what each owns."""
import re
from fractions import Fraction
from types import SimpleNamespace

import pytest

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.guarantee import LINKAGES as GUARANTEE_LINKAGES
from fragrelease.idpir.guarantee import release_guarantee
from fragrelease.idpir.linkage import LINKED_ROWS as LINKED
from fragrelease.idpir.linkage import UNLINKED_ROWS as UNLINKED
from fragrelease.idpir.linkage import ir_linkage
from fragrelease.kinds import KINDS
from fragrelease.protocol.config import ReleaseConfig
from fragrelease.protocol.fragmentation import (
    FRAGMENTATIONS,
    HORIZONTAL,
    LINKAGES,
    VERTICAL,
    fragmentation_of,
)
from fragrelease.protocol.kind import release_kind
from fragrelease.protocol.messages import Plan
from fragrelease.protocol.options import ReleaseOptions
from fragrelease.synthesis.kind import synthetic_guarantee


def test_the_wire_strings_are_the_registrys_names_and_the_models_literals():
    assert tuple(FRAGMENTATIONS) == ("horizontal", "vertical")
    assert LINKAGES == tuple(KINDS) and LINKAGES[:3] == ("linked", "unlinked", "synthetic")
    assert GUARANTEE_LINKAGES == ("linked", "unlinked")  # the IR kinds' own statement; synthetic states its own
    assert fragmentation_of("vertical") is VERTICAL and ir_linkage("unlinked") is UNLINKED
    assert [release_kind(name).name for name in LINKAGES] == list(LINKAGES)
    # the pydantic models accept exactly the registered names (their Literal is the registry's)
    assert set(ReleaseConfig.model_fields["fragmentation"].annotation.__args__) == set(FRAGMENTATIONS)
    assert set(Plan.model_fields["fragmentation"].annotation.__args__) == set(FRAGMENTATIONS)
    assert set(ReleaseOptions.model_fields["linkage"].annotation.__args__) == set(LINKAGES)
    with pytest.raises(InvalidParameterError, match=r"^fragmentation must be one of \('horizontal', 'vertical'\), "
                                                    r"not 'diagonal'$"):
        fragmentation_of("diagonal")
    with pytest.raises(InvalidParameterError, match="^" + re.escape(f"linkage must be one of {list(KINDS)}, not 'joined'") + "$"):
        release_kind("joined")
    with pytest.raises(InvalidParameterError, match=r"^linkage must be one of \('linked', 'unlinked'\), not 'synthetic'$"):
        ir_linkage("synthetic")


def test_each_fragmentation_owns_its_composition_budget_rows_and_assembly():
    attrs = {"a": ("x", "y", "z"), "b": ("w",)}
    assert (HORIZONTAL.composition, HORIZONTAL.assembly) == ("parallel", "union")
    assert (VERTICAL.composition, VERTICAL.assembly) == ("sequential", "join")
    assert HORIZONTAL.owner_epsilons(Fraction(1), attrs, "equal") == {"a": 1, "b": 1}
    assert VERTICAL.owner_epsilons(Fraction(1), attrs, "equal") == {"a": Fraction(1, 2), "b": Fraction(1, 2)}
    assert VERTICAL.owner_epsilons(Fraction(1), attrs, "by-attributes") == {"a": Fraction(3, 4), "b": Fraction(1, 4)}
    assert HORIZONTAL.budget(Fraction(1), {"a": ("x", "y"), "b": ("x", "y")}, "equal").composition == "parallel"
    assert VERTICAL.budget(Fraction(1), attrs, "by-attributes").spent() == 1
    assert (HORIZONTAL.epsilon_split("by-attributes"), VERTICAL.epsilon_split("by-attributes")) == ("none", "by-attributes")
    assert (HORIZONTAL.released_rows([3, 4]), VERTICAL.released_rows([5, 5])) == (7, 5)
    assert HORIZONTAL.owner_attributes(["p", "q"], ["q"]) == ["p", "q"] and VERTICAL.owner_attributes(["p", "q"], ["q"]) == ["q"]
    metas = [SimpleNamespace(attributes=({"name": "x"},)), SimpleNamespace(attributes=({"name": "y"},))]
    assert HORIZONTAL.plan_attributes(metas) == ({"name": "x"},)
    assert VERTICAL.plan_attributes(metas) == ({"name": "x"}, {"name": "y"})


def test_each_fragmentation_checks_its_owners_in_the_configuration():
    owner = SimpleNamespace(name="a", rows=2, source=None, attributes=None)
    assert HORIZONTAL.owner_config_problems("owners[0]", owner, k=5, min_k=3, fixed_k=None) == [
        "owners[0].rows: 2 rows are fewer than k = 5 (owner 'a'); every owner needs at least k records"]
    assert VERTICAL.owner_config_problems("owners[0]", owner, k=5, min_k=3, fixed_k=None) == [
        "owners[0].rows: for horizontal releases only (owner 'a')",
        "owners[0].attributes: required for a vertical owner (owner 'a')"]


def test_the_guarantee_takes_its_sentences_from_the_objects():
    common = dict(mechanism="dp-ir", epsilon="1", composition="sequential", category_order="declared")
    for linkage in (LINKED, UNLINKED):
        g = release_guarantee(linkage=linkage.name, fragmentation="vertical", **common)
        assert g["table"] == linkage.table(epsilon="1", short="DP", composition="sequential")
        assert VERTICAL.guarantee_sentence() in g["against"]
        assert "digest of its pseudonymised id set" not in release_guarantee(linkage=linkage.name, **common)["against"]
    assert "1-DP as a whole (sequential composition" in UNLINKED.table(epsilon="1", short="DP", composition="sequential")
    assert synthetic_guarantee(epsilon="1/2")["table"].startswith("whole table ε-DP, ε = 1/2: the rows are drawn")
    assert release_kind("synthetic").guarantee(**common) == synthetic_guarantee(epsilon="1")
    for linkage in (LINKED, UNLINKED):  # the kind states the IR guarantee of its rows
        assert release_kind(linkage.name).guarantee(**common) == release_guarantee(linkage=linkage.name, **common)
    assert (LINKED.rows_are_records, UNLINKED.shuffles_columns) == (True, True)
    assert not (LINKED.shuffles_columns or UNLINKED.rows_are_records)
    assert [release_kind(n).single_owner for n in LINKAGES[:3]] == [True, False, False]  # protect(): rows are records
