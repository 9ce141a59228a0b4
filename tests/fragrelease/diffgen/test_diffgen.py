"""DiffGen and DistDiffGen (docs/specification.md §7): budget, samplers, scores, protocol equivalence and leakage.

Small Paillier keys (512 bits) are used here **for test speed only**; releases refuse keys < 2048 bits."""
from __future__ import annotations

import json
import threading
from fractions import Fraction
from multiprocessing import Pipe

import numpy as np
import pytest
from fit import counts_fit, follows, rejects, same_law
from scipy import stats

from fragrelease.diffgen.engine import Cut, choose_split_point, epsilon_prime, specialize_cut
from fragrelease.diffgen.params import DiffGenResult, ProtocolParams, TwoPartyParams
from fragrelease.diffgen.predictors import (
    AttributeCounts,
    NumericDomain,
    flat_taxonomy,
    marginal_counts,
    score_children,
    taxonomy_from_paths,
)
from fragrelease.diffgen.release import (
    diffgen,
    leaf_codes,
    noisy_leaf_counts,
    release_counts,
    sparse_min_count,
    synthesize_cells,
)
from fragrelease.diffgen.two_party import Channel, PartyInput, run_party
from fragrelease.errors import DomainError, InvalidParameterError, ProtocolError
from fragrelease.rng.diffgen import SecureDiffGenRandomness, SeededDiffGenRandomness, gumbel_max
from fragrelease.schemas.taxonomies import ADULT_CLASS_VALUES, ADULT_PREDICTORS, adult_predictors

TEST_KEY_BITS = 512  # tests only
HOSPITAL = ["age", "sex", "race", "marital-status", "relationship", "native-country", "education", "education-num"]
INSURER = ["workclass", "occupation", "fnlwgt", "capital-gain", "capital-loss", "hours-per-week"]


@pytest.fixture(scope="module")
def small(adult_pdf):
    return adult_pdf.iloc[:2000].reset_index(drop=True)


def _party(df, attrs, name):
    return PartyInput(name, df["record_id"].to_numpy(), df["income"].to_numpy(), {a: df[a].to_numpy() for a in attrs},
                      adult_predictors(attrs))


def _run_pair(df, *, h, eps=1, score="max", seeds=(1, 2), hosp=HOSPITAL, ins=INSURER, shuffle_insurer=False,
              noise=None):
    a, b = Pipe()
    ins_df = df.sample(frac=1.0, random_state=3) if shuffle_insurer else df
    out, errors = {}, []

    def go(role, party, conn, seed):
        try:
            ch = Channel(conn, keep_transcript=True)
            mode = {} if noise is None else {"noise": noise[0] if role == "hospital" else noise[1]}
            protocol = ProtocolParams(epsilon=eps, specializations=h, score=score, key_bits=TEST_KEY_BITS,
                                      allow_small_key=True, **mode)
            out[role] = (run_party(party, ch, role=role, protocol=protocol, class_values=ADULT_CLASS_VALUES,
                                   randomness=SeededDiffGenRandomness(seed)), ch)
        except Exception as exc:  # surfaced below
            errors.append(exc)
            conn.close()

    threads = [threading.Thread(target=go, args=("hospital", _party(df, hosp, "h"), a, seeds[0])),
               threading.Thread(target=go, args=("insurer", _party(ins_df, ins, "i"), b, seeds[1]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out["hospital"], out["insurer"]


def _cut_from_labels(labels, predictors):
    cut = Cut.top(predictors)
    for a, labs in labels.items():
        p = cut.predictors[a]
        if isinstance(p, NumericDomain):
            cut.bounds[a] = [float(x.strip("[").split(",")[0]) for x in labs] + [p.hi]
        else:
            cut.nodes[a] = list(labs)
    return cut


# ---- budget ----------------------------------------------------------------------------------
def test_epsilon_prime_is_exact_and_total_stays_within_epsilon(small):
    assert epsilon_prime(Fraction(1), 6, 10) == Fraction(1, 52)
    assert epsilon_prime(Fraction(1, 10), 6, 4) == Fraction(1, 280)
    res = diffgen(adult_predictors(), {a: small[a].to_numpy() for a in ADULT_PREDICTORS}, small["income"].to_numpy(),
                  ADULT_CLASS_VALUES, epsilon=Fraction(1, 2), specializations=7, score="max",
                  randomness=SeededDiffGenRandomness(0))
    eps_p = Fraction(1, 2) / (2 * (6 + 14))
    n_numeric_specs = sum(s.composition == "parallel" for s in res.ledger)
    assert res.spent() == eps_p * (6 + 7 + n_numeric_specs) + Fraction(1, 4)
    assert res.spent() <= Fraction(1, 2)
    assert all(isinstance(s.epsilon, Fraction) for s in res.ledger)


@pytest.mark.parametrize("eps,h", [(0, 3), (-1, 3), (1, -1)])
def test_bad_budget_parameters_are_refused(eps, h):
    with pytest.raises(InvalidParameterError, match=str(h if eps == 1 else eps)):
        epsilon_prime(Fraction(eps), 6, h)


def test_bad_inputs_name_the_value(small):
    preds = adult_predictors(["age", "sex"])
    cols = {"age": small["age"].to_numpy().copy(), "sex": small["sex"].to_numpy()}
    cols["age"][5] = 130
    with pytest.raises(DomainError, match="130"):
        diffgen(preds, cols, small["income"], ADULT_CLASS_VALUES, epsilon=1, specializations=1, score="max",
                randomness=SeededDiffGenRandomness(0))
    cols = {"age": small["age"].to_numpy(), "sex": np.where(np.arange(len(small)) == 3, "Other", small["sex"])}
    with pytest.raises(DomainError, match="Other"):
        diffgen(preds, cols, small["income"], ADULT_CLASS_VALUES, epsilon=1, specializations=1, score="max",
                randomness=SeededDiffGenRandomness(0))
    with pytest.raises(InvalidParameterError, match="gini"):
        diffgen(preds, {"age": small["age"], "sex": small["sex"]}, small["income"], ADULT_CLASS_VALUES, epsilon=1,
                specializations=1, score="gini", randomness=SeededDiffGenRandomness(0))


# ---- scores and taxonomies -------------------------------------------------------------------
def test_scores_on_a_hand_example():
    kids = np.array([[8, 2], [1, 9]])
    assert score_children(kids, "max") == 17
    h = lambda p: -(p * np.log2(p) + (1 - p) * np.log2(1 - p))  # noqa: E731
    assert score_children(kids, "infogain") == pytest.approx(h(9 / 20) - 0.5 * h(0.2) - 0.5 * h(0.1))
    assert score_children(np.array([[5, 5], [5, 5]]), "infogain") == pytest.approx(0.0)


def test_taxonomy_from_arx_paths():
    tax = taxonomy_from_paths("x", [["a", "A", "*"], ["b", "A", "*"], ["c", "C", "*"]])
    assert tax.root == "*" and tax.children["*"] == ("A", "C") and tax.leaves["A"] == ("a", "b")
    assert tax.is_leaf("a") and not tax.is_leaf("A")
    flat = flat_taxonomy("y", ["p", "q"])
    assert flat.children["*"] == ("p", "q") and flat.leaves["*"] == ("p", "q")
    edu = adult_predictors(["education"])[0]
    assert len(edu.leaves[edu.root]) == 16


# ---- samplers --------------------------------------------------------------------------------
def test_gumbel_max_has_the_exponential_mechanism_distribution():
    lw = np.log(np.array([1.0, 2.0, 4.0, 8.0]))
    rnd = SecureDiffGenRandomness()
    draws = np.array([gumbel_max(lw, rnd)[0] for _ in range(3000)])
    observed = np.bincount(draws, minlength=4)
    expected = 3000 * np.exp(lw) / np.exp(lw).sum()
    assert counts_fit(observed, expected)
    assert gumbel_max(np.array([-np.inf, 0.0]), rnd)[0] == 1


def test_secure_laplace_and_gaussian_squares_ks():
    rnd = SecureDiffGenRandomness()
    eps = 0.5
    lap = rnd.laplace(np.zeros(2000), 2 / eps)
    assert follows(lap, stats.laplace(scale=2 / eps).cdf)
    y = rnd.gaussian(8000, np.sqrt(1 / eps)).reshape(4, 2000)
    x = y[0] ** 2 - y[1] ** 2 + y[2] ** 2 - y[3] ** 2  # X1 + X2 noise of the two-party protocol
    assert follows(x, stats.laplace(scale=2 / eps).cdf)


def test_split_point_weights_by_interval_length():
    # no records: every split has score 0, so the split point is uniform over the domain
    counts = AttributeCounts(np.array([], dtype=float), np.zeros((0, 2), dtype=np.int64))
    rnd = SeededDiffGenRandomness(7)
    s = np.array([choose_split_point(counts, 0.0, 100.0, top=True, eps_prime=Fraction(1), score="max",
                                     randomness=rnd)[0] for _ in range(2000)])
    assert follows(s, stats.uniform(0, 100).cdf)
    # a perfect separator between 10 and 20 dominates with a large ε'
    counts = AttributeCounts(np.array([10.0, 20.0]), np.array([[50, 0], [0, 50]]))
    s = [choose_split_point(counts, 0.0, 100.0, top=True, eps_prime=Fraction(4), score="max", randomness=rnd)
         for _ in range(200)]
    assert all(10 < x < 20 and u == 100 for x, u in s)


# ---- DiffGen ---------------------------------------------------------------------------------
def test_every_leaf_is_released_and_counts_are_unbiased(small):
    cols = {a: small[a].to_numpy() for a in ADULT_PREDICTORS}
    res = diffgen(adult_predictors(), cols, small["income"], ADULT_CLASS_VALUES, epsilon=1, specializations=6,
                  score="max", randomness=SeededDiffGenRandomness(11))
    shape = tuple(res.cut.size(a) for a in res.cut.attributes) + (2,)
    assert res.noisy_counts.shape == shape
    true = np.bincount(leaf_codes(res.cut, cols, small["income"], ADULT_CLASS_VALUES),
                       minlength=int(np.prod(shape))).reshape(shape)
    assert true.sum() == len(small) and (true == 0).any()  # empty leaves exist and still get a count
    d = (res.noisy_counts - true).ravel()
    assert np.all(d != 0)
    assert abs(d.mean()) < 4 * 2 * np.sqrt(2) / np.sqrt(d.size) + 0.05


def test_max_score_prefers_informative_specializations(small):
    # with a large budget the first selections go to attributes that separate the class
    counts = {p.attribute: marginal_counts(p, small[p.attribute], small["income"], ADULT_CLASS_VALUES)
              for p in adult_predictors()}
    cut, _ = specialize_cut(adult_predictors(), counts, epsilon=Fraction(200), specializations=3, score="max",
                            randomness=SeededDiffGenRandomness(2))
    specialized = {a for a in cut.attributes if cut.size(a) > 1}
    assert specialized & {"marital-status", "relationship", "capital-gain", "education-num", "education"}
    assert "fnlwgt" not in specialized and "race" not in specialized


def test_synthetic_records_stay_in_their_cells(small):
    cols = {a: small[a].to_numpy() for a in ADULT_PREDICTORS}
    res = diffgen(adult_predictors(), cols, small["income"], ADULT_CLASS_VALUES, epsilon=1, specializations=8,
                  score="max", randomness=SeededDiffGenRandomness(5))
    k = release_counts(res.noisy_counts)
    assert k.min() >= 0
    idx = np.repeat(np.arange(k.size), k.ravel())
    parts = np.unravel_index(idx, k.shape)
    codes = {a: parts[i] for i, a in enumerate(res.cut.attributes)}
    values = synthesize_cells(res.cut, codes, np.random.default_rng(0))
    for a in res.cut.attributes:
        assert np.array_equal(res.cut.cell_codes(a, values[a]), codes[a]), a


def test_sparse_filter_expands_at_most_about_one_empty_cell():
    for cells in (2, 10, 1_000, 2_500_000):
        for eps in (Fraction(1, 10), Fraction(1), Fraction(8)):
            t = sparse_min_count(cells, eps)
            b = float(2 / eps)
            assert t >= 1 and cells * 0.5 * np.exp(-(t - 0.5) / b) <= 1 + 1e-12
            assert t == 1 or cells * 0.5 * np.exp(-(t - 1.5) / b) > 1  # the smallest such threshold
    assert sparse_min_count(2_500_000, Fraction(1, 10)) == 282  # 20 * ln(1.25e6) + 0.5 = 281.2
    gen = np.random.default_rng(7)  # empirically: 2,000 empty cells, 400 tries, expanded empty cells ~ 1
    t = sparse_min_count(2_000, 1)
    k = release_counts(gen.laplace(0.0, 2.0, size=(400, 2_000)), min_count=t)
    assert (k > 0).sum(axis=1).mean() < 1.3 and k[k > 0].min() >= t
    assert release_counts(np.array([-3.0, 0.4, 0.6, 4.4, 4.6]), 5).tolist() == [0, 0, 0, 0, 5]
    for bad in (0, 1.5):
        with pytest.raises(InvalidParameterError, match=str(bad)):
            release_counts(np.zeros(2), bad)
    with pytest.raises(InvalidParameterError, match="-1"):
        sparse_min_count(10, -1)


def test_evaluation_shortcut_has_the_full_expansion_distribution():
    """Empty leaves expanded without enumerating them == Laplace on every empty leaf, for t = 1 and t > 1."""
    from fragrelease.experiments.diffgen import synthetic_leaf_counts

    rnd, gen = SeededDiffGenRandomness(3), np.random.default_rng(4)
    n_leaves, b, tries = 3_000, 4.0, 150
    true = np.repeat(np.arange(10), 50)  # 10 non-empty leaves of 50 records, 2,990 empty
    for t in (1, 6):
        short_n, short_k, full_n, full_k = [], [], [], []
        for _ in range(tries):
            idx, cnt = synthetic_leaf_counts(true, n_leaves, Fraction(1, 2), gen, rnd, min_count=t)
            empty = idx >= 10
            short_n.append(empty.sum())
            short_k.extend(cnt[empty])
            full = release_counts(gen.laplace(0.0, b, size=n_leaves - 10), t)
            full_n.append((full > 0).sum())
            full_k.extend(full[full > 0])
            assert cnt.min() >= t and np.unique(idx).size == idx.size
        p = 0.5 * np.exp(-(t - 0.5) / b)
        sd_n = np.sqrt((n_leaves - 10) * p * (1 - p) / tries)
        assert abs(np.mean(short_n) - (n_leaves - 10) * p) < 4 * sd_n
        assert abs(np.mean(full_n) - (n_leaves - 10) * p) < 4 * sd_n
        assert same_law(short_k, full_k)


def test_evaluation_run_gives_both_expansions_of_one_draw(adult_pdf):
    from fragrelease.experiments.diffgen import run_cell
    from fragrelease.rng.laplace import evaluation_generator

    train, test = adult_pdf.iloc[:3000].reset_index(drop=True), adult_pdf.iloc[-1000:].reset_index(drop=True)
    rows = run_cell(train, test, epsilon=Fraction(1, 4), h=8, score="max", randomness=SeededDiffGenRandomness(6),
                    gen=evaluation_generator(), min_leaf_fraction=0.002)
    by = {r["expansion"]: r for r in rows}
    assert set(by) == {"filtered", "rounded"} and by["rounded"]["min_count"] == 1
    assert by["filtered"]["min_count"] == sparse_min_count(by["filtered"]["leaves"], Fraction(1, 4)) > 1
    assert 0 < by["filtered"]["synthetic_records"] <= by["rounded"]["synthetic_records"]
    assert all(0.5 < r["accuracy"] <= 1 for r in rows)


def test_root_selection_sharpens_with_epsilon_and_infogain_stays_near_uniform(adult_pdf):
    from fragrelease.experiments.diffgen import N_TRAIN, root_selection

    train = adult_pdf.iloc[:N_TRAIN]
    mx, ig = root_selection(train, score="max"), root_selection(train, score="infogain")
    for t in (mx, ig):
        assert t["p_best"].is_monotonic_increasing and ((t["p_best"] > t["p_uniform"]) & (t["p_best"] <= 1)).all()
    assert mx.set_index("epsilon").loc["1", "p_best"] > 0.99  # Max picks its best candidate at ε = 1
    # InfoGain in [0, 1] bits with Δu = 1: at ε = 1 the best candidate is barely above uniform
    assert ig.set_index("epsilon").loc["1", "p_best"] - ig["p_uniform"].iloc[0] < 1e-3


# ---- DistDiffGen -----------------------------------------------------------------------------
def test_two_party_counts_are_exact_shares_and_match_diffgen_cut(small):
    (r1, c1), (r2, c2) = _run_pair(small, h=6, shuffle_insurer=True)
    assert r1.cut_labels == r2.cut_labels and np.array_equal(r1.noisy_counts, r2.noisy_counts)
    assert r1.spent() == r2.spent() <= 1
    cut = _cut_from_labels(r1.cut_labels, adult_predictors(HOSPITAL + INSURER))
    cols = {a: small[a].to_numpy() for a in HOSPITAL + INSURER}
    true = np.bincount(leaf_codes(cut, cols, small["income"], ADULT_CLASS_VALUES),
                       minlength=r1.noisy_counts.size).reshape(r1.noisy_counts.shape)
    # the released counts are the same leaf x class counts DiffGen would perturb for this cut
    assert np.array_equal((r1.share + r2.share).astype(np.int64), true)
    d = (r1.noisy_counts - true).ravel()
    assert abs(d.mean()) < 4 * 2 * np.sqrt(2) / np.sqrt(d.size) + 0.1
    assert c1.sent_messages == c2.received_messages and c1.sent_bytes == c2.received_bytes


def test_two_party_noise_has_diffgens_laplace_distribution(small):
    """--noise gaussian-squares (opt-in): X1 + X2 - C over all leaves of a few runs vs Lap(2/ε) (KS, fixed sizes)."""
    sub = small.iloc[:300]
    hosp, ins = ["race", "sex", "age"], ["workclass", "occupation"]
    diffs = []
    for seed in range(40):
        (r1, _), _ = _run_pair(sub, h=4, eps=1, seeds=(100 + seed, 200 + seed), hosp=hosp, ins=ins,
                               noise=("gaussian-squares", "gaussian-squares"))
        cut = _cut_from_labels(r1.cut_labels, adult_predictors(hosp + ins))
        true = np.bincount(leaf_codes(cut, {a: sub[a].to_numpy() for a in hosp + ins}, sub["income"],
                                      ADULT_CLASS_VALUES), minlength=r1.noisy_counts.size)
        diffs.extend((r1.noisy_counts.ravel() - true).tolist())
        if len(diffs) >= 600:
            break
    diffs = diffs[:600]
    single = noisy_leaf_counts(true_counts=np.zeros(600), epsilon=1, randomness=SeededDiffGenRandomness(9))
    assert same_law(diffs, single)
    assert follows(diffs, stats.laplace(scale=2.0).cdf)


def _two_laplace_cdf(b: float):
    """CDF of the sum of two independent Lap(b) variables (density (1 + |z|/b) e^(-|z|/b) / (4b))."""
    def cdf(z):
        z = np.asarray(z, dtype=float)
        tail = 0.5 * np.exp(-np.abs(z) / b) * (1 + np.abs(z) / (2 * b))
        return np.where(z >= 0, 1 - tail, tail)
    return cdf


def test_default_laplace_each_noise_is_private_against_the_other_party(small):
    """Default share noise is laplace-each: the other party's view of the counts, X_j - C_j, is Lap(2/ε), and the
    release's noise X1 + X2 - C is Lap(2/ε) + Lap(2/ε) (KS, fixed sizes); the ledger names the mode."""
    # run_party and run_adult_two_party take ProtocolParams, run_two_party_release TwoPartyParams
    for model in (ProtocolParams, TwoPartyParams):
        assert model.model_fields["noise"].default == "laplace-each", model.__name__
    sub = small.iloc[:300]
    hosp, ins = ["race", "sex", "age"], ["workclass", "occupation"]
    cols = {a: sub[a].to_numpy() for a in hosp + ins}
    own, total, mixed = [], [], []
    for seed in range(40):
        (r1, _), (r2, _) = _run_pair(sub, h=4, eps=1, seeds=(300 + seed, 400 + seed), hosp=hosp, ins=ins)  # default
        assert r1.noise == r2.noise == "laplace-each"
        assert any("laplace-each" in s.step and s.epsilon == Fraction(1, 2) for s in r1.ledger)
        for r in (r1, r2):
            own.extend((r.noisy_share - r.share.astype(float)).ravel().tolist())
        assert np.allclose(r1.noisy_counts, r1.noisy_share + r2.noisy_share)
        cut = _cut_from_labels(r1.cut_labels, adult_predictors(hosp + ins))
        true = np.bincount(leaf_codes(cut, cols, sub["income"], ADULT_CLASS_VALUES), minlength=r1.noisy_counts.size)
        total.extend((r1.noisy_counts.ravel() - true).tolist())
        if seed < 3:  # the paper's construction, for contrast: a party's own X_i - C_i is a difference of squares
            (g1, _), _ = _run_pair(sub, h=4, eps=1, seeds=(500 + seed, 600 + seed), hosp=hosp, ins=ins,
                                   noise=("gaussian-squares", "gaussian-squares"))
            assert g1.noise == "gaussian-squares" and any("NOT DP against the other party" in s.step for s in g1.ledger)
            mixed.extend((g1.noisy_share - g1.share.astype(float)).ravel().tolist())
        if len(own) >= 800:
            break
    assert follows(own[:800], stats.laplace(scale=2.0).cdf)
    assert follows(total[:400], _two_laplace_cdf(2.0))
    assert 11 < np.var(total[:400]) < 21  # Lap + Lap: variance 16 (one Lap(2): 8); standard error about 1.5
    assert rejects(mixed, stats.laplace(scale=2.0).cdf)  # not Laplace: the documented gap
    with pytest.raises(ProtocolError, match="noise"):
        _run_pair(sub, h=1, eps=1, hosp=hosp, ins=ins, noise=("laplace-each", "gaussian-squares"))


def test_sparse_filter_for_laplace_each_expands_at_most_about_one_empty_cell():
    """With laplace-each an empty cell's released count is Lap(2/ε) + Lap(2/ε); the 'auto' threshold must keep the
    expected number of expanded empty cells at most 1 (Monte Carlo, 2,000,000 fixed-seed draws, 2,000 cells)."""
    from fragrelease.diffgen.release import sparse_min_count
    from fragrelease.jobs.diffgen.runner import resolve_min_count

    cells, b = 2000, 2.0
    t1 = sparse_min_count(cells, 1)
    t2 = resolve_min_count("auto", cells, Fraction(1), laplace_terms=2)
    rng = np.random.default_rng(23)
    z = rng.laplace(0, b, 2_000_000) + rng.laplace(0, b, 2_000_000)
    k = np.floor(z + 0.5)
    assert cells * np.mean(k >= t2) < 1.0  # expected 0.85
    assert cells * np.mean(k >= t2 - 1) > 1.0  # the smallest such threshold
    assert cells * np.mean(k >= t1) > 2.5  # the single-Laplace threshold lets about 3.3 through
    assert resolve_min_count("auto", cells, Fraction(1)) == t1
    with pytest.raises(InvalidParameterError, match="3"):
        resolve_min_count("auto", cells, Fraction(1), laplace_terms=3)


def test_gaussian_squares_peer_delta_is_about_0_22_at_epsilon_1():
    """The other party's view under gaussian-squares, C + Y_c² − Y_d², is (ε/2, δ)-DP only for δ ≈ 0.22 at ε = 1.

    Checked against samples (fixed seed and sizes): the density ε/(2π)·K0(ε|z|/2) used for δ matches the
    simulated Y_c² − Y_d², and a Monte Carlo estimate of E[(1 − e^{ε/2} f(Z − 1)/f(Z))+] matches the
    quadrature.
    """
    from scipy import integrate, special

    from fragrelease.diffgen.share_noise import gaussian_squares_peer_delta, share_noise_guarantee

    eps = 1.0
    delta = gaussian_squares_peer_delta(eps)
    assert 0.215 < delta < 0.23
    assert gaussian_squares_peer_delta("1/2") < delta < gaussian_squares_peer_delta(2)
    rng = np.random.default_rng(17)
    y = rng.normal(0.0, np.sqrt(1 / eps), size=(2, 400_000))
    z = y[0] ** 2 - y[1] ** 2

    def f(x):
        return eps / (2 * np.pi) * special.k0(eps * np.abs(x) / 2)

    for a in (0.1, 0.5, 1.0, 3.0):
        p = 2 * integrate.quad(f, 0, a)[0]
        assert abs(np.mean(np.abs(z) <= a) - p) < 0.005, a
    mc = np.mean(np.clip(1 - np.exp(eps / 2) * f(z - 1) / f(z), 0, None))
    assert abs(mc - delta) < 0.005
    g = share_noise_guarantee("gaussian-squares", 1)
    assert g["dp_against_other_party"] is False and g["other_party_delta"] == round(delta, 4)
    assert "NOT differentially private against the other party" in g["against_other_party"]
    assert "0.222" in g["against_other_party"] and "epsilon-DP" in g["against_public"]
    g = share_noise_guarantee("laplace-each", 1)
    assert g["dp_against_other_party"] is True and g["other_party_delta"] is None
    with pytest.raises(InvalidParameterError, match="gaussian"):
        share_noise_guarantee("gaussian", 1)
    with pytest.raises(InvalidParameterError, match="-1"):
        gaussian_squares_peer_delta(-1)


def test_distributed_winner_has_the_single_party_distribution():
    """The winner drawn across parties has DiffGen's exponential-mechanism distribution (χ², fixed n)."""
    from fragrelease.diffgen.paillier_ops import compare_p1, compare_p2, keypair

    lw1, lw2 = np.log([1.0, 3.0]), np.log([2.0, 6.0])
    pk, sk = keypair(TEST_KEY_BITS, True)
    a, b = Pipe()
    ca, cb = Channel(a), Channel(b)
    r1, r2 = SeededDiffGenRandomness(21), SeededDiffGenRandomness(22)
    picks = []
    n = 1500
    m2s = []

    def p2():
        for _ in range(n):
            j, m = gumbel_max(lw2, r2)
            m2s.append(j)
            compare_p2(cb, pk, m)

    t = threading.Thread(target=p2)
    t.start()
    for _i in range(n):
        j, m = gumbel_max(lw1, r1)
        picks.append(("p1", j) if compare_p1(ca, sk, pk, m) else None)
    t.join()
    picks = [p if p else ("p2", m2s[i]) for i, p in enumerate(picks)]
    labels = [("p1", 0), ("p1", 1), ("p2", 0), ("p2", 1)]
    observed = np.array([sum(p == lab for p in picks) for lab in labels])
    w = np.array([1, 3, 2, 6], dtype=float)
    assert counts_fit(observed, n * w / w.sum())


def test_no_raw_attribute_values_in_the_messages(small):
    (r1, c1), (r2, c2) = _run_pair(small.iloc[:400], h=4)
    public = {"hello", "cmp_key", "cmp_query", "cmp_reply", "winner", "instruction", "count_key", "count_cipher",
              "count_masked", "noisy_share", "hospital", "insurer", "max", "numeric", "categorical",
              "gaussian-squares", "laplace-each", *ADULT_CLASS_VALUES, *HOSPITAL, *INSURER}
    preds = {p.attribute: p for p in adult_predictors(HOSPITAL + INSURER)}
    for p in preds.values():  # the public taxonomies and the released cut's labels
        if not isinstance(p, NumericDomain):
            public |= set(p.children) | set(p.leaves)
    for labs in r1.cut_labels.values():
        public |= set(labs)
    numeric_splits = set()
    for raw in c1.transcript:
        msg = json.loads(raw)
        if msg["kind"] in ("count_cipher", "count_masked"):
            assert all(isinstance(x, str) and int(x, 16) > 0 for row in msg["rows"] for x in row)
            continue
        for key, value in msg.items():
            if key in ("c", "n", "ids", "epsilon", "node", "children", "root"):
                continue
            vals = value if isinstance(value, list) else [value]
            for v in vals:
                if isinstance(v, str):
                    assert v in public, (msg["kind"], key, v)
                if isinstance(v, dict):  # attribute descriptions in hello
                    assert set(v) == {"name", "kind", "root"} and v["name"] in public
        if msg["kind"] == "instruction":
            assert msg["attribute"] in public and set(msg["children"]) <= public
            if msg["split"] is not None:
                numeric_splits.add(msg["split"])
        if msg["kind"] == "noisy_share":
            assert len(msg["x"]) == r1.noisy_counts.size  # one masked value per leaf, never per record
    # no per-record plaintext: the only messages with n entries are the ciphertext rows
    for raw in c1.transcript:
        msg = json.loads(raw)
        if msg["kind"] not in ("count_cipher", "noisy_share"):
            assert all(len(v) != 400 for v in msg.values() if isinstance(v, list)), msg["kind"]
    # a raw value sequence of a party never travels: e.g. the hospital's ages
    blob = b"".join(c1.transcript)
    assert json.dumps(small.iloc[:400]["age"].tolist()[:20]).encode() not in blob


def test_protocol_refuses_disagreement(small):
    with pytest.raises(ProtocolError, match="epsilon|h|held by both"):
        _run_pair(small.iloc[:100], h=1, hosp=["age", "sex"], ins=["sex", "race"])


def test_release_keys_must_be_2048_bits(small):
    from fragrelease.diffgen.paillier_ops import keypair

    with pytest.raises(InvalidParameterError, match="512"):
        keypair(512, False)


@pytest.mark.parametrize("argv,needle", [
    (["diffgen", "run", "--epsilon", "0", "--output", "x"], "epsilon"),
    (["diffgen", "run", "--score", "gini", "--output", "x"], "gini"),
    (["diffgen", "two-party", "--hospital-attributes", "age,sex", "--insurer-attributes", "sex", "--output", "x"],
     "sex"),
    (["diffgen", "two-party", "--hospital-attributes", "age,blood", "--output", "x"], "blood"),
    (["diffgen", "two-party", "--key-bits", "1024", "--output", "x"], "1024"),
    (["diffgen", "run", "--synthetic-min-count", "0", "--output", "x"], "'0'"),
    (["diffgen", "two-party", "--synthetic-min-count", "many", "--output", "x"], "many"),
    (["diffgen", "two-party", "--noise", "gaussian", "--output", "x"], "gaussian"),
])


def test_cli_bad_input_exits_2_naming_the_value(argv, needle, capsys):
    from fragrelease.jobs.cli import run_cli

    assert run_cli(argv) == 2
    assert needle in capsys.readouterr().err


def test_cli_two_party_defaults_to_laplace_each_and_flags_gaussian_squares(monkeypatch, capsys):
    """`diffgen two-party` passes laplace-each unless --noise says otherwise; the help says the opt-in is not DP
    against the other party."""
    import typer

    from fragrelease.diffgen.share_noise import share_noise_guarantee
    from fragrelease.jobs.cli import diffgen_app, run_cli
    from fragrelease.jobs.diffgen import runner as jd

    seen = []

    def fake_release(spark, params):  # stands in for the parties and the Spark write; returns a release summary
        seen.append(params.noise)
        return DiffGenResult(generalized="g", synthetic="s", versions=(0, 0), cells=4, synthetic_rows=0,
                             synthetic_min_count=1, cut={}, ledger=(), spent=Fraction(1), seconds=0.0,
                             guarantee=share_noise_guarantee(params.noise, 1))

    monkeypatch.setattr(jd, "run_two_party_release", fake_release)
    assert run_cli(["diffgen", "two-party", "--output", "x"]) == 0
    out = "".join(capsys.readouterr().out.split())
    assert "sharenoiselaplace-each" in out and "againsttheotherparty:epsilon-DP" in out
    assert run_cli(["diffgen", "two-party", "--noise", "gaussian-squares", "--output", "x"]) == 0
    out = "".join(capsys.readouterr().out.split())
    assert "againsttheotherparty:NOTdifferentiallyprivateagainsttheotherparty" in out
    assert seen == ["laplace-each", "gaussian-squares"]
    cmd = typer.main.get_command(diffgen_app).commands["two-party"]
    opt = next(p for p in cmd.params if p.name == "noise")
    assert opt.default == "laplace-each"
    assert "NOT DP against the other party" in opt.help and "0.22" in opt.help


def test_parties_run_in_separate_os_processes():
    from fragrelease.jobs.diffgen.processes import run_adult_two_party

    protocol = ProtocolParams(epsilon=1, specializations=2, key_bits=TEST_KEY_BITS, allow_small_key=True)
    r_h, r_i = run_adult_two_party(["age", "sex"], ["workclass", "hours-per-week"], protocol, rows=(0, 300),
                                   backend="pandas")
    assert r_h.party == "hospital" and r_i.party == "insurer"
    assert r_h.cut_labels == r_i.cut_labels and np.array_equal(r_h.noisy_counts, r_i.noisy_counts)
    assert r_h.share is None and r_i.share is None  # shares never leave their process
    assert r_h.channel["sent_messages"] == r_i.channel["received_messages"]
    assert r_h.channel["sent_bytes"] + r_i.channel["sent_bytes"] > 300 * 256  # the per-record ciphertexts
    assert r_h.spent() == r_i.spent() <= 1
