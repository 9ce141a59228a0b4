"""The accuracy preview (fragrelease.idpir.preview): closed forms, an empirical check against the production
sampler, the iDP-IR bound, budgets and the suggestions."""
from fractions import Fraction

import numpy as np
import pytest

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.mechanisms import draw_attribute, get_mechanism
from fragrelease.idpir.microaggregation import ir_centroids
from fragrelease.idpir.postprocess import finish_centroids
from fragrelease.idpir.preview import (
    OwnerPlan,
    PreviewParams,
    attribute_previews,
    preview,
    preview_from_provenance,
    preview_params,
    suggest,
)
from fragrelease.idpir.stage import AttributeTask
from fragrelease.protocol.config import config_from_dict
from fragrelease.protocol.options import ReleaseOptions
from fragrelease.rng.laplace import SecureLaplace
from fragrelease.rng.simulation import SeededSimulation

NUM = {"name": "x", "kind": "numeric", "domain": [0.0, 100.0]}
CAT = {"name": "c", "kind": "categorical", "categories": ["a", "b", "c", "d", "e"]}


def _params(specs, *, k=3, epsilon="1", n=None, mechanism="dp-ir", order="declared", owners=None, **kw):
    names = tuple(s["name"] for s in specs)
    owners = owners or (OwnerPlan("o1", names, n),)
    return PreviewParams(mechanism=mechanism, k=k, epsilon=Fraction(epsilon), fragmentation="horizontal",
                         owners=tuple(owners), specs={s["name"]: s for s in specs}, category_order=order, **kw)


def test_dp_ir_scale_is_the_production_calibration_and_the_closed_forms_follow():
    (a,) = attribute_previews(_params([NUM], k=50, epsilon="1/10", n=11_100))
    mech = get_mechanism("dp-ir")
    assert a.exact and a.sensitivity == 2.0
    assert a.scale == mech.scale(2.0, Fraction(1, 10), 11_100 // 50)  # the same double the release uses
    assert a.scale == pytest.approx(20.0, rel=1e-9) and a.mean_abs_noise == a.scale
    assert a.half_width == pytest.approx(20.0 * np.log(20), rel=1e-9)
    assert a.coverage == pytest.approx(2 * np.log(20) / (50 * 0.1), rel=1e-9)
    # the Laplace draw covers 120 % of the domain, yet the projected release is far better than the mean
    assert a.error is not None and a.released_error < 0.3 * a.baseline_error and not a.warn


def test_without_a_record_count_the_scale_is_delta_over_epsilon():
    (a,) = attribute_previews(_params([NUM], k=50, epsilon="1/10"))
    assert a.scale == 2.0 / 0.1


def test_empirical_noise_of_the_mechanism_matches_the_prediction():
    """200,000 clusters of the DP-IR mechanism through the production sampler: mean |noise| and the 95 %
    quantile of |noise| within 2 % of b and b·ln 20, and 95 % ± 0.5 % of the draws inside the interval."""
    n, k, eps = 600_000, 3, Fraction(1, 2)
    values = np.linspace(0.0, 100.0, n)
    clusters, noisy, _ = draw_attribute(values, AttributeTask("a", 0.0, 100.0, categorical=False, epsilon=eps),
                                        k=k, mechanism="dp-ir", noise=SecureLaplace())
    noise = np.abs(noisy - ir_centroids(values, clusters))
    assert noise.size == 200_000
    (a,) = attribute_previews(_params([NUM], k=k, epsilon=eps, n=n))
    assert np.mean(noise) == pytest.approx(a.mean_abs_noise, rel=0.02)
    assert np.quantile(noise, 0.95) == pytest.approx(a.half_width, rel=0.02)
    assert np.mean(noise <= a.half_width) == pytest.approx(0.95, abs=0.005)


def test_empirical_rank_moves_match_the_prediction():
    """Every cluster's exact mean rank is the interior rank 3 of 5; the released (clamped, rounded) rank moves
    with probability exp(−1/(2b)) and by two or more with exp(−3/(2b)), here b ≈ 1."""
    n, k, eps = 600_000, 3, Fraction(4, 3)
    ranks = np.full(n, 3.0)
    clusters, noisy, sizes = draw_attribute(ranks, AttributeTask("a", 1.0, 5.0, categorical=False, epsilon=eps),
                                            k=k, mechanism="dp-ir", noise=SecureLaplace())
    released = finish_centroids(noisy, sizes, 1.0, 5.0, True, ReleaseOptions.of(postprocess="none"))
    (a,) = attribute_previews(_params([CAT], k=k, epsilon=eps, n=n))
    assert a.scale == pytest.approx(1.0, rel=1e-6)
    assert np.mean(released != 3) == pytest.approx(a.p_move, abs=0.01)
    assert np.mean(np.abs(released - 3) >= 2) == pytest.approx(a.p_move2, abs=0.01)
    assert a.p_move == pytest.approx(np.exp(-0.5), rel=1e-5)


@pytest.mark.parametrize("data", [
    np.zeros(200), np.full(200, 100.0), np.r_[np.zeros(100), np.full(100, 100.0)], np.linspace(0, 100, 200),
    np.r_[np.zeros(199), [100.0]], np.linspace(0, 100, 7),
])
@pytest.mark.parametrize("k", [3, 5, 50])
def test_idp_ir_bound_is_never_below_the_local_scale(data, k):
    k = min(k, len(data))  # 7 values: one cluster of all n < 2k values
    eps = Fraction(1, 4)
    mech = get_mechanism("idp-ir")
    c = max(len(data) // k, 1)
    local = mech.scale(mech.sensitivity(data, k, 0.0, 100.0), eps, c)
    (a,) = attribute_previews(_params([NUM], k=k, epsilon=eps, n=len(data), mechanism="idp-ir"))
    assert not a.exact and local <= a.scale


def test_plain_idp_uses_k_1():
    (a,) = attribute_previews(_params([NUM], k=50, epsilon="1", mechanism="idp"))
    assert a.sensitivity == 100.0 and a.scale == 100.0


def test_budgets_follow_the_release_rules():
    cfg = config_from_dict({
        "name": "v", "dataset": "adult", "fragmentation": "vertical", "epsilon": "1", "k": 50,
        "epsilon_split": "equal", "work_dir": "/tmp/w", "output": "/tmp/o",
        "owners": [{"name": "a", "attributes": ["x", "c"]}, {"name": "b", "attributes": ["y"]}]})
    y = {"name": "y", "kind": "numeric", "domain": [0.0, 10.0]}
    pv = preview(cfg, [NUM, CAT, y])
    by = {a.attribute: a for a in pv.attributes}
    assert by["x"].epsilon == Fraction(1, 4) and by["y"].epsilon == Fraction(1, 2)
    assert by["c"].epsilon_centroids == Fraction(1, 4) * Fraction(9, 10)  # dp-frequency keeps 9/10 for centroids
    assert by["c"].order_scale == pytest.approx(2 / (0.25 * 0.1), rel=1e-6)
    assert by["x"].owners == ("a",) and by["y"].owners == ("b",)
    by_attr = preview(cfg.model_copy(update={"epsilon_split": "by-attributes"}), [NUM, CAT, y])
    assert {a.epsilon for a in by_attr.attributes} == {Fraction(1, 3)}


def _search_fits(p, seed, **change):
    """What the suggestions' search sees for ``p`` changed: the same seeded draws, replayed."""
    from dataclasses import replace

    from fragrelease.idpir.preview import DEFAULT_THRESHOLD
    from fragrelease.idpir.preview_suggest import _fits, _Replay

    return _fits(replace(p, **change), DEFAULT_THRESHOLD, _Replay(SeededSimulation(seed)))


def test_suggested_k_and_epsilon_are_the_smallest_that_fit():
    p = _params([NUM, CAT], k=5, epsilon="1/20", n=5000, order="dp-frequency")
    pv = attribute_previews(p, randomness=SeededSimulation(1))
    assert all(a.warn for a in pv)
    s = suggest(p, randomness=SeededSimulation(4), previews=pv)
    assert s is not None and s.k is not None and s.epsilon is not None
    assert _search_fits(p, 4, k=s.k) and not _search_fits(p, 4, k=s.k - 1)
    assert _search_fits(p, 4, epsilon=s.epsilon)
    from fragrelease.idpir.preview_suggest import _previous_two_digits

    assert not _search_fits(p, 4, epsilon=_previous_two_digits(s.epsilon))  # the two-digit number just below
    assert _previous_two_digits(Fraction(28, 100)) == Fraction(27, 100) and _previous_two_digits(Fraction(1)) == \
        Fraction(99, 100)
    assert s.keep == () and set(s.drop) == {"x", "c"}  # alone, each still warns at k = 5, ε = 1/20


def test_the_suggested_k_respects_the_record_counts():
    p = _params([NUM], k=3, epsilon="1/1000", n=100)
    s = suggest(p, randomness=SeededSimulation(2))
    assert s is not None and s.k is None and "n = 100" in " ".join(s.notes)


def test_keep_drops_the_worst_relative_error_first():
    """Six numeric attributes and a binary one: the binary attribute keeps its categories far better (relative to
    its constant release) than the numeric ones, so it is kept and numeric ones are dropped until the rest fit."""
    specs = [{"name": f"a{i}", "kind": "numeric", "domain": [0.0, 1.0]} for i in range(6)]
    specs.append({"name": "b", "kind": "categorical", "categories": ["y", "n"]})
    p = _params(specs, k=10, epsilon="1/20", n=2000)
    s = suggest(p, randomness=SeededSimulation(3))
    assert s is not None and "b" in s.keep and set(s.keep) | set(s.drop) == {a["name"] for a in specs}
    assert s.drop and all(d.startswith("a") for d in s.drop)
    kept = tuple(a for a in p.owners[0].attributes if a in s.keep)
    from dataclasses import replace

    assert _search_fits(replace(p, owners=(OwnerPlan("o1", kept, 2000),)), 3)


def test_nothing_to_suggest_when_everything_fits():
    assert suggest(_params([NUM], k=200, epsilon="1", n=10_000), randomness=SeededSimulation(1)) is None


def test_without_record_counts_nothing_is_simulated_or_warned():
    pv = preview_params(_params([NUM, CAT], k=50, epsilon="1/100"))
    assert all(a.error is None and not a.warn for a in pv.attributes) and pv.suggestions is None
    assert any("released error is not simulated" in n for n in pv.notes)


def test_the_warning_names_the_worst_attribute_and_its_baseline():
    pv = preview_params(_params([NUM, CAT], k=5, epsilon="1/20", n=5000), randomness=SeededSimulation(1),
                        with_suggestions=False)
    text = pv.warning_text()
    assert text is not None and text.startswith("2 of 2 attributes are expected to be released with an error at "
                                                "least 0.5 times that of releasing their mean (numeric) or most "
                                                "frequent category (categorical), on data drawn from the declared "
                                                "domain (worst: ")
    worst = max(pv.attributes, key=lambda a: a.error_ratio)
    assert f"worst: {worst.attribute}," in text


def test_bad_threshold_is_refused():
    with pytest.raises(InvalidParameterError, match="threshold"):
        attribute_previews(_params([NUM]), threshold=0)


def test_the_provenance_gives_the_same_table_as_the_configuration():
    prov = {"mechanism": "idp-ir", "k": 20, "epsilon": "1", "fragmentation": "horizontal",
            "category_order": "dp-frequency", "category_order_share": "1/10", "attributes": [NUM, CAT],
            "owners": [{"name": o, "n_records": n, "attributes": ["x", "c"],
                        "budgets": [{"attribute": "x", "epsilon": "1/2", "epsilon_order": "0",
                                     "epsilon_centroids": "1/2"},
                                    {"attribute": "c", "epsilon": "1/2", "epsilon_order": "1/20",
                                     "epsilon_centroids": "9/20"}]} for o, n in (("a", 600), ("b", 400))]}
    from_prov = preview_from_provenance(prov, randomness=SeededSimulation(9))
    owners = (OwnerPlan("a", ("x", "c"), 600), OwnerPlan("b", ("x", "c"), 400))
    from_params = attribute_previews(_params([NUM, CAT], k=20, epsilon="1", mechanism="idp-ir",
                                             order="dp-frequency", owners=owners), randomness=SeededSimulation(9))
    assert from_prov.attributes == from_params and from_prov.suggestions is None
    assert all(a.error is not None for a in from_params)
