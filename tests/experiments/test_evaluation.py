"""The evaluation shortcut (prefix sums, per-cluster errors) equals the release mechanism + MeanSSE,
for every category order; dp-frequency spends exactly ε_attr per categorical attribute."""
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from noise_injection import HashedLaplace

from fragrelease.errors import InvalidParameterError
from fragrelease.experiments.evaluation import (
    AttributeSpec,
    CategoryCounts,
    OrderSetting,
    Scenario,
    SortedAttribute,
    postprocess_comparison,
    run_once,
)
from fragrelease.experiments.paper_order import data_frequency_order
from fragrelease.idpir.category_order import declared_order, dp_frequency_order, histogram_scale
from fragrelease.idpir.mechanisms import protect_attribute
from fragrelease.idpir.metrics import mean_sse
from fragrelease.idpir.stage import AttributeTask
from fragrelease.protocol.options import ReleaseOptions
from fragrelease.rng.laplace import FastLaplace, laplace_epsilon
from fragrelease.schemas.adult import SCHEMA as ADULT

SPECS = [AttributeSpec.from_attribute(a) for a in ADULT.protected]
ORDERS = [OrderSetting.parse("data-frequency"), OrderSetting.parse("declared"),
          OrderSetting.parse("dp-frequency", "0.1"), OrderSetting.parse("dp-frequency", "0.2")]


@pytest.fixture(scope="module")
def sample(adult_pdf):
    pdf = adult_pdf.sample(1_200, random_state=4).reset_index(drop=True)
    data = {s.name: pdf[s.name].to_numpy(object if s.categorical else float) for s in SPECS}
    return data, pdf["record_id"].to_numpy()


def injected_order(values, spec, setting, eps_attr, noise):
    """The order an owner uses, computed here independently (same noise source => same histogram)."""
    cats, counts = list(spec.categories), {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    if setting.order == "data-frequency":
        return data_frequency_order(counts, cats), eps_attr
    if setting.order == "declared":
        return declared_order(cats), eps_attr
    share = setting.share_fraction
    return dp_frequency_order(counts, cats, eps_attr * share, noise, attribute=spec.name), eps_attr * (1 - share)


def reference(data, ids, mechanism, k, eps_attr, noise, convention, setting, postprocess="none"):
    """protect_attribute on the whole table, then mean_sse and the label TVD of the protected table."""
    protected, original, cat, tvds, orders = {}, {}, {}, [], {}
    for s in SPECS:
        eps_c = eps_attr
        if s.categorical:
            order, eps_c = injected_order(data[s.name], s, setting, eps_attr, noise)
            orders[s.name] = order
            ranks = {c: i + 1 for i, c in enumerate(order)}
            vals = np.array([ranks[v] for v in data[s.name]], float)
        else:
            vals = data[s.name].astype(float)
        protected[s.name] = protect_attribute(vals, AttributeTask(s.name, s.lo, s.hi, categorical=s.categorical, epsilon=eps_c),
                                              k=k, mechanism=mechanism, noise=noise, tiebreak=ids,
                                              options=ReleaseOptions.of(postprocess=postprocess))
        original[s.name] = vals
        cat[s.name] = s.categorical
        if s.categorical:
            labels = np.array(order, dtype=object)[protected[s.name].astype(int) - 1]
            p = np.array([np.sum(data[s.name] == c) for c in s.categories], float) / len(ids)
            q = np.array([np.sum(labels == c) for c in s.categories], float) / len(ids)
            tvds.append(0.5 * np.abs(p - q).sum())
    return mean_sse(original, protected, cat, convention), float(np.mean(tvds)), orders


@pytest.mark.parametrize("setting", ORDERS, ids=lambda o: o.label)
@pytest.mark.parametrize("mechanism,k", [("idp-ir", 25), ("dp-ir", 40), ("idp", 1), ("idp-ir", 7)])
@pytest.mark.parametrize("convention", ["authors", "paper"])
def test_run_once_equals_mechanism_plus_metric(sample, mechanism, k, convention, setting):
    """Both post-processing values of one run equal protect_attribute(..., postprocess=p) + mean_sse."""
    data, ids = sample
    noise = HashedLaplace(salt=f"{mechanism}{k}")
    got = run_once(data, ids, SPECS, Scenario("centralized"), mechanisms=[mechanism], epsilons=["1"], ks=[k],
                   noise=noise, convention=convention, category_order=setting, postprocess=["isotonic", "none"])
    assert [r["postprocess"] for r in got] == ["isotonic", "none"]
    for row in got:
        want_sse, want_tvd, _ = reference(data, ids, mechanism, k, Fraction(1, 10), noise, convention, setting,
                                          postprocess=row["postprocess"])
        assert row["mean_sse"] == pytest.approx(want_sse, rel=1e-9)
        assert row["category_tvd"] == pytest.approx(want_tvd, rel=1e-9)
        assert (row["category_order"], row["order_share"]) == (setting.order, setting.share)
    if mechanism != "idp":  # the projection changes the release (plain iDP at ε_attr = 0.1 too, checked below)
        assert got[0]["mean_sse"] != pytest.approx(got[1]["mean_sse"], rel=1e-6)


class Counting(HashedLaplace):
    """HashedLaplace that counts centroid draws per attribute."""

    def __init__(self):
        super().__init__(salt="paired")
        self.draws = {}

    def perturb(self, values, scales, attributes, clusters):
        if len(attributes):
            self.draws[attributes[0]] = self.draws.get(attributes[0], 0) + len(values)
        return super().perturb(values, scales, attributes, clusters)


def test_postprocess_values_share_one_noise_draw_and_isotonic_helps_at_small_k(sample):
    """One draw per cluster for both rows (paired noise), and at k = 1 (plain iDP, ε = 1) the projection
    at least halves MeanSSE on this 1,200-record sample (fixed noise: HashedLaplace)."""
    data, ids = sample
    noise = Counting()
    rows = run_once(data, ids, SPECS, Scenario("centralized"), mechanisms=["idp-ir"], epsilons=["1"], ks=[1],
                    noise=noise, category_order=OrderSetting.parse("declared"), postprocess=["none", "isotonic"])
    assert {a: n for a, n in noise.draws.items() if "#" not in a} == {s.name: len(ids) for s in SPECS}
    by = {r["postprocess"]: r["mean_sse"] for r in rows}
    assert by["isotonic"] <= 0.5 * by["none"]


def test_postprocess_comparison_is_paired():
    per_run = pd.DataFrame([
        {"dataset": "d", "scenario": "centralized", "split": "none", "mechanism": "idp-ir", "category_order": "declared",
         "order_share": "0", "epsilon": "1", "k": 5, "run": r, "postprocess": p, "mean_sse": v}
        for r, (a, b) in enumerate([(10.0, 4.0), (12.0, 7.0), (8.0, 3.0)]) for p, v in (("none", a), ("isotonic", b))])
    out = postprocess_comparison(per_run)
    assert len(out) == 1
    row = out.iloc[0]
    d = np.array([-6.0, -5.0, -5.0])
    assert row["ratio"] == pytest.approx(14 / 30)
    assert row["diff"] == pytest.approx(d.mean())
    assert row["se_diff"] == pytest.approx(d.std(ddof=1) / np.sqrt(3))  # paired: far below the unpaired SE
    assert not row["worse_by_2se"] and row["runs"] == 3


def test_postprocess_errors_name_the_value(sample):
    data, ids = sample
    kw = dict(mechanisms=["idp-ir"], epsilons=["1"], ks=[20], noise=FastLaplace(),
              category_order=OrderSetting.parse("declared"))
    with pytest.raises(InvalidParameterError, match="'projection'"):
        run_once(data, ids, SPECS, Scenario("centralized"), postprocess=["projection"], **kw)
    with pytest.raises(InvalidParameterError, match="distinct"):
        run_once(data, ids, SPECS, Scenario("centralized"), postprocess=["none", "none"], **kw)


def test_the_injected_orders_differ(sample):
    """The equality test above is not vacuous: the three orders rank native-country differently."""
    data, ids = sample
    noise = HashedLaplace(salt="idp-ir25")
    orders = {o.label: reference(data, ids, "idp-ir", 25, Fraction(1, 10), noise, "authors", o)[2]["native-country"]
              for o in ORDERS}
    assert len(set(orders.values())) == len(ORDERS)


class Recording(HashedLaplace):
    """HashedLaplace that records (attribute id, scale) of every draw."""

    def __init__(self):
        super().__init__(salt="budget")
        self.calls = []

    def perturb(self, values, scales, attributes, clusters):
        self.calls += list(zip(attributes, np.asarray(scales, float), strict=True))
        return super().perturb(values, scales, attributes, clusters)


@pytest.mark.parametrize("scenario", [Scenario("centralized"), Scenario("horizontal", owner_rows=(400, 500, 300))],
                         ids=lambda s: s.name)
def test_dp_frequency_spends_exactly_eps_attr_per_categorical_attribute(sample, scenario):
    """Histogram (Δ = 2) + centroids (DP-IR: Δ = (hi − lo)/k) = ε_attr; numeric attributes keep ε_attr.

    Every owner draws its own histogram, once per ε (the order is redrawn for every ε and run).
    """
    data, ids = sample
    k, share = 40, Fraction(1, 5)
    for eps_text in ("0.1", "1"):
        noise = Recording()
        rows = run_once(data, ids, SPECS, scenario, mechanisms=["dp-ir"], epsilons=[eps_text], ks=[k], noise=noise,
                        category_order=OrderSetting.parse("dp-frequency", "0.2"), rng=np.random.default_rng(1))
        assert rows[0]["order_share"] == "0.2"
        eps_attr = Fraction(eps_text) / len(SPECS)
        owners = max(1, len(scenario.owner_rows))
        for s in SPECS:
            delta = (s.hi - s.lo) / k
            hist = {sc for a, sc in noise.calls if a == f"{s.name}#order"}
            cent = [sc for a, sc in noise.calls if a == s.name]
            assert len(set(cent)) <= owners and cent
            # ε spent, by OpenDP's own privacy map of the sampler's measurement: each owner's scale
            # covers its c centroids (owners' c differ here, so a scale's number of draws is its c)
            eps_cent_budget = eps_attr * (1 - share) if s.categorical else eps_attr
            for sc in set(cent):
                assert laplace_epsilon(sc, delta, cent.count(sc)) <= eps_cent_budget
                assert delta / sc == pytest.approx(float(eps_cent_budget), rel=1e-6)  # factor 1 + c·2**-40/Δ
            if s.categorical:
                n_hist = sum(1 for a, _ in noise.calls if a == f"{s.name}#order")
                assert n_hist == owners * len(s.categories)  # one histogram per owner
                (h,) = hist
                m = len(s.categories)
                assert h == histogram_scale(eps_attr * share, m)
                eps_order = laplace_epsilon(h, 2.0, m)
                assert eps_order <= eps_attr * share
                assert float(eps_order) == pytest.approx(float(eps_attr * share), rel=1e-9)
                assert 2 / h + delta / cent[0] == pytest.approx(float(eps_attr), rel=1e-6)
            else:
                assert not hist


def test_dp_frequency_order_is_redrawn_per_epsilon_and_run(sample):
    data, ids = sample
    noise = Recording()
    setting = OrderSetting.parse("dp-frequency", "0.1")
    for _ in range(2):
        run_once(data, ids, SPECS, Scenario("centralized"), mechanisms=["idp-ir", "dp-ir"], epsilons=["0.1", "1"],
                 ks=[20, 50], noise=noise, category_order=setting, sorted_cache={})
    n_hist = sum(1 for a, _ in noise.calls if a == "race#order")
    assert n_hist == 2 * 2 * 5  # runs x ε x |dom(race)|, shared by the mechanisms and k of one ε


def test_paper_order_is_labelled_in_every_row(sample):
    data, ids = sample
    rows = run_once(data, ids, SPECS, Scenario("centralized"), mechanisms=["idp-ir", "dp-ir"], epsilons=["0.5", "1"],
                    ks=[20, 50], noise=FastLaplace(), category_order=OrderSetting.parse("data-frequency"),
                    postprocess=["none"])
    assert len(rows) == 8
    assert all(r["category_order"] == "data-frequency" and r["order_share"] == "0" and r["postprocess"] == "none"
               for r in rows)
    with pytest.raises(TypeError):
        run_once(data, ids, SPECS, Scenario("centralized"), mechanisms=["idp-ir"], epsilons=["1"], ks=[20],
                 noise=FastLaplace())  # no silent default order


def test_order_setting_errors_name_the_value():
    with pytest.raises(InvalidParameterError, match="'frequency'"):
        OrderSetting.parse("frequency")
    with pytest.raises(InvalidParameterError, match="1.5"):
        OrderSetting.parse("dp-frequency", "1.5")
    with pytest.raises(InvalidParameterError, match="None"):
        OrderSetting.parse("dp-frequency")
    with pytest.raises(InvalidParameterError, match="0.1"):
        OrderSetting.parse("declared", "0.1")


def test_category_tvd_is_zero_without_noise_at_k1_and_one_for_disjoint_support():
    spec = AttributeSpec("c", 1, 3, True, ("a", "b", "c"))
    counts = CategoryCounts(np.array(["a", "a", "b", "c"], dtype=object), spec)
    attr = counts.ranked(("b", "a", "c"))
    assert attr.x.tolist() == [1.0, 2.0, 2.0, 3.0]
    assert attr.released_counts(1, attr.centroids(1)).tolist() == [2.0, 1.0, 1.0]
    assert attr.released_counts(2, np.array([3.0, 3.0])).tolist() == [0.0, 0.0, 4.0]
    assert attr.squared_error(2, np.array([2.0, 2.0])) == 2.0
    with pytest.raises(InvalidParameterError, match="'zz'"):
        CategoryCounts(np.array(["zz"], dtype=object), spec)


def test_squared_error_of_exact_centroids_is_within_cluster_ss():
    x = np.array([1.0, 2.0, 3.0, 10.0, 11.0, 30.0])
    attr = SortedAttribute(x, np.arange(6), AttributeSpec("a", 0, 100, False))
    z = attr.centroids(3)
    assert z.tolist() == [2.0, 17.0]
    assert attr.squared_error(3, z) == pytest.approx(2.0 + (49 + 36 + 169))


def test_vertical_by_attributes_matches_centralized_budget(sample):
    data, ids = sample
    groups = (tuple(s.name for s in SPECS[:3]), tuple(s.name for s in SPECS[3:]))
    noise = HashedLaplace(salt="v")
    kw = dict(mechanisms=["idp-ir"], epsilons=["0.5"], ks=[20], noise=noise,
              category_order=OrderSetting.parse("dp-frequency", "0.1"))
    central = run_once(data, ids, SPECS, Scenario("centralized"), **kw)
    by_attr = run_once(data, ids, SPECS, Scenario("vertical", owner_attributes=groups, split="by-attributes"), **kw)
    equal = run_once(data, ids, SPECS, Scenario("vertical", owner_attributes=groups, split="equal"), **kw)
    assert by_attr[0]["mean_sse"] == pytest.approx(central[0]["mean_sse"], rel=1e-12)
    assert by_attr[0]["category_tvd"] == pytest.approx(central[0]["category_tvd"], rel=1e-12)
    assert equal[0]["mean_sse"] != pytest.approx(central[0]["mean_sse"], rel=1e-6)


def test_horizontal_trends_with_fast_sampler(sample):
    """Fixed sample sizes and thresholds: MeanSSE falls with ε; iDP-IR <= DP-IR on average."""
    data, ids = sample
    scen = Scenario("horizontal", owner_rows=(400, 500, 300))
    rows = []
    for _ in range(10):
        rows += run_once(data, ids, SPECS, scen, mechanisms=["idp-ir", "dp-ir"], epsilons=["0.1", "1"], ks=[20],
                         noise=FastLaplace(), category_order=OrderSetting.parse("dp-frequency", "0.1"))
    mean = {}
    for r in rows:
        mean.setdefault((r["mechanism"], r["epsilon"]), []).append(r["mean_sse"])
    mean = {key: np.mean(v) for key, v in mean.items()}
    assert mean[("idp-ir", "1")] < mean[("idp-ir", "0.1")]
    assert mean[("idp-ir", "1")] <= mean[("dp-ir", "1")] * 1.05
