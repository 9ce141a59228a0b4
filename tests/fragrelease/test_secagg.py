"""Pairwise-mask secure aggregation (fragrelease.secagg; Bonawitz et al., CCS 2017): the sum decodes
exactly, a missing or foreign message does not, one owner's message is uniform whatever its values,
pair keys are symmetric and bound to the session, and the wire encoding round-trips."""
import numpy as np
import pytest

from fragrelease import secagg
from fragrelease.errors import ProtocolError
from fragrelease.secagg import (
    MODULUS,
    KeyAgreementKey,
    decode_vector,
    encode_vector,
    mask,
    mask_stream,
    pair_keys,
    parse_public_hex,
    session_context,
    unmask_sum,
)

PLAN = "plan-1"


def fixed_key(i: int) -> KeyAgreementKey:
    """A deterministic key pair (tests only): private bytes ``i`` repeated."""
    return KeyAgreementKey.from_private_bytes(bytes([i]) * 32)


def owners(names, *, fixed=False):
    keys = {n: fixed_key(i + 1) if fixed else KeyAgreementKey.generate() for i, n in enumerate(names)}
    return keys, {n: k.public_hex() for n, k in keys.items()}


def all_pair_keys(keys, participants, plan=PLAN):
    ctx = session_context(plan, participants)
    return {n: pair_keys(n, keys[n], participants, context=ctx) for n in keys}


def masked_round(values_by_owner, label="m0", check=0, fixed=False):
    keys, participants = owners(list(values_by_owner), fixed=fixed)
    pk = all_pair_keys(keys, participants)
    return {n: mask(v, own_name=n, keys=pk[n], label=label, check=check) for n, v in values_by_owner.items()}


# --- 1. the sum decodes exactly --------------------------------------------------------------------------

@pytest.mark.parametrize("m", [1, 2, 5])
def test_the_sum_decodes_exactly(m):
    gen = np.random.default_rng(7 + m)
    names = [f"owner-{i}" for i in range(m)]
    values = {n: gen.integers(-2**40, 2**40, size=64, dtype=np.int64) for n in names}
    values[names[0]][:4] = [2**40 - 1, -(2**40), -1, 0]
    masked = masked_round(values)
    expected = np.sum(np.stack(list(values.values())), axis=0)
    got = unmask_sum(list(masked.values()))
    assert got.dtype == np.int64 and got.shape == (64,)
    np.testing.assert_array_equal(got, expected)
    if m > 1:  # masked: no message equals its values mod 2^64
        assert all(not np.array_equal(masked[n], values[n].view(np.uint64)) for n in names)
    # the check elements decode to 0 and are dropped
    np.testing.assert_array_equal(unmask_sum(list(masked_round(values, check=2).values()), check=2), expected)


def test_one_owner_is_its_values_mod_2_64_and_any_shape_is_flattened_in_c_order():
    v = np.array([[-3, 5, 0], [7, -(2**40), 2**40]], dtype=np.int64)
    out = mask(v, own_name="a", keys={}, label="x")
    assert out.dtype == np.uint64 and out.shape == (6,)
    assert [int(x) for x in out] == [(int(x) % MODULUS) for x in v.ravel()]
    np.testing.assert_array_equal(unmask_sum([out]), v.ravel())


def test_sign_convention_two_owners():
    masked = masked_round({"a": np.array([10, -4]), "b": np.array([1, 2])}, label="L", fixed=True)
    keys, participants = owners(["a", "b"], fixed=True)
    ka = pair_keys("a", keys["a"], participants, context=session_context(PLAN, participants))["b"]
    s = mask_stream(ka, "L", 2)
    np.testing.assert_array_equal(masked["a"], np.array([10, -4]).view(np.uint64) + s)  # a < b: +
    np.testing.assert_array_equal(masked["b"], np.array([1, 2]).view(np.uint64) - s)    # b > a: -


def test_sum_near_the_bound_decodes_and_past_it_is_refused():
    big = 2**62 - 1
    np.testing.assert_array_equal(unmask_sum(list(masked_round({"a": np.array([big]), "b": np.array([0])}).values())),
                                  [big])
    with pytest.raises(ProtocolError, match="element 0 of 1"):
        unmask_sum(list(masked_round({"a": np.array([big]), "b": np.array([1])}).values()))
    with pytest.raises(ProtocolError, match="element 0 of 1"):
        unmask_sum(list(masked_round({"a": np.array([-big]), "b": np.array([-1])}).values()))


def test_mask_refuses_bad_values():
    with pytest.raises(ProtocolError, match="'a'.*float64"):
        mask(np.array([1.5]), own_name="a", keys={}, label="x")
    with pytest.raises(ProtocolError, match="'a'.*uint64"):
        mask(np.array([1], dtype=np.uint64), own_name="a", keys={}, label="x")
    with pytest.raises(ProtocolError, match="itself"):
        mask(np.array([1]), own_name="a", keys={"a": bytes(32)}, label="x")


# --- 2. a missing or foreign message does not decode -----------------------------------------------------

def test_a_missing_message_does_not_decode():
    gen = np.random.default_rng(1)
    names = ["a", "b", "c", "d"]
    masked = masked_round({n: gen.integers(0, 1000, size=64) for n in names})
    for left_out in names:  # each uniform element passes the 2^62 bound with probability 1/2: 2^-64 in all
        with pytest.raises(ProtocolError, match="do not cancel|did not cancel"):
            unmask_sum([masked[n] for n in names if n != left_out])
    # a single element with a check element: a false pass has probability 2^-64
    # (bound 2^63 lets the value element pass: the check element alone catches it)
    masked = masked_round({n: np.array([5]) for n in names}, check=1)
    with pytest.raises(ProtocolError, match="element 1 of 2"):
        unmask_sum([masked[n] for n in names[1:]], check=1, bound=2**63)
    np.testing.assert_array_equal(unmask_sum(list(masked.values()), check=1, bound=2**63), [20])


@pytest.mark.parametrize("foreign", ["plan", "extra owner", "other key"])
def test_a_message_masked_under_another_session_does_not_decode(foreign):
    names = ["a", "b", "c"]
    keys, participants = owners(names)
    pk = all_pair_keys(keys, participants)
    if foreign == "plan":
        ctx = session_context("plan-2", participants)
        pk["c"] = pair_keys("c", keys["c"], participants, context=ctx)
    else:
        other = dict(participants)
        if foreign == "extra owner":
            other["e"] = KeyAgreementKey.generate().public_hex()
        else:  # b's key replaced (by someone in the middle): c derives another key with "b"
            other["b"] = KeyAgreementKey.generate().public_hex()
        pk["c"] = {p: k for p, k in pair_keys("c", keys["c"], other, context=session_context(PLAN, other)).items()
                   if p in participants}
    masked = [mask(np.arange(32), own_name=n, keys=pk[n], label="m") for n in names]
    with pytest.raises(ProtocolError, match="did not cancel"):
        unmask_sum(masked)


def test_the_bound_alone_lets_half_of_the_non_cancelled_elements_pass():
    """The docstring's 1/2 per element: 2,000 elements of a sum missing one message (fixed keys:
    deterministic); Binomial(2000, 1/2) lies within ±120 of 1000 except with probability < 1e-7."""
    keys, participants = owners(["a", "b"], fixed=True)
    pk = all_pair_keys(keys, participants)
    alone = mask(np.zeros(2000, np.int64), own_name="a", keys=pk["a"], label="m")
    decoded = alone.view(np.int64)
    inside = int(np.sum(np.abs(decoded.astype(object)) < 2**62))
    assert 880 <= inside <= 1120


def test_unmask_sum_refuses_mismatched_input():
    with pytest.raises(ProtocolError, match="no masked"):
        unmask_sum([])
    with pytest.raises(ProtocolError, match="message 1 has shape"):
        unmask_sum([np.zeros(3, np.uint64), np.zeros(4, np.uint64)])
    with pytest.raises(ProtocolError, match="message 0 has shape"):
        unmask_sum([np.zeros(3, np.int64)])
    with pytest.raises(ProtocolError, match="bound"):
        unmask_sum([np.zeros(3, np.uint64)], bound=0)


def test_a_reused_label_reveals_the_difference():
    """The docstring's warning: two vectors masked with the same keys and label differ by their values."""
    keys, participants = owners(["a", "b"], fixed=True)
    pk = all_pair_keys(keys, participants)
    x, y = np.array([3, 9, -2]), np.array([1, 1, 1])
    diff = mask(x, own_name="a", keys=pk["a"], label="r") - mask(y, own_name="a", keys=pk["a"], label="r")
    np.testing.assert_array_equal(diff.view(np.int64), x - y)
    other = mask(x, own_name="a", keys=pk["a"], label="r") - mask(y, own_name="a", keys=pk["a"], label="s")
    assert not np.array_equal(other.view(np.int64), x - y)


# --- 3. one owner's message is uniform whatever its values ----------------------------------------------

N_DRAWS = 4000
BINS = 16
# scipy.stats.chi2.ppf(1 - 1e-7, 15) = 62.33: a uniform sample fails with probability 1e-7 per check
CHI2_THRESHOLD = 62.33


def chi2_of_top_bits(firsts: np.ndarray) -> float:
    counts = np.bincount((firsts >> np.uint64(60)).astype(np.int64), minlength=BINS)
    expected = len(firsts) / BINS
    return float(np.sum((counts - expected) ** 2 / expected))


def looks_uniform(firsts: np.ndarray) -> bool:
    return chi2_of_top_bits(firsts) < CHI2_THRESHOLD


VECTORS = {"zeros": np.zeros(4, np.int64),
           "large": np.array([-(10**12), 10**12, 10**12, 10**12], dtype=np.int64)}


@pytest.fixture(scope="module")
def fresh_draw_firsts():
    """Vector name -> the first element of owner "b"'s message over N_DRAWS fresh key draws (a new key
    pair for each of 3 participants every time; both vectors masked under each draw)."""
    out = {name: np.empty(N_DRAWS, np.uint64) for name in VECTORS}
    for i in range(N_DRAWS):
        keys, participants = owners(["a", "b", "c"])
        pk = pair_keys("b", keys["b"], participants, context=session_context(PLAN, participants))
        for name, values in VECTORS.items():
            out[name][i] = mask(values, own_name="b", keys=pk, label="m")[0]
    return out


def test_threshold_is_the_chi2_quantile():
    stats = pytest.importorskip("scipy.stats")
    assert abs(stats.chi2.ppf(1 - 1e-7, BINS - 1) - CHI2_THRESHOLD) < 0.01


@pytest.mark.parametrize("name", list(VECTORS))
def test_one_masked_message_is_uniform_whatever_its_values(name, fresh_draw_firsts):
    firsts = fresh_draw_firsts[name]
    assert looks_uniform(firsts), chi2_of_top_bits(firsts)
    assert len(np.unique(firsts)) == N_DRAWS  # fresh pads every draw (a repeat has probability < 2^-40)


def weak_mask(values, *, own_name, keys, label):
    """A broken mask: pads of 40 bits (the top 24 bits of each pad are zero)."""
    out = np.asarray(values, np.int64).view(np.uint64).copy()
    for peer, key in keys.items():
        s = mask_stream(key, label, out.size) >> np.uint64(24)
        out = out + s if peer > own_name else out - s
    return out


@pytest.mark.parametrize("name", list(VECTORS))
def test_the_uniformity_check_rejects_an_unmasked_or_weakly_masked_message(name):
    """The checker has power: the same statistic over N_DRAWS messages refuses no mask and 40-bit pads
    (pair keys drawn from a seeded generator: the checker, not the key agreement, is under test)."""
    values = VECTORS[name]
    unmasked = np.full(N_DRAWS, values.view(np.uint64)[0])  # values + 0: no pad
    assert not looks_uniform(unmasked)
    gen = np.random.default_rng(3)
    weak = np.array([weak_mask(values, own_name="b", keys={"a": gen.bytes(32), "c": gen.bytes(32)}, label="m")[0]
                     for _ in range(N_DRAWS)], dtype=np.uint64)
    assert not looks_uniform(weak)


# --- 4. pair keys ----------------------------------------------------------------------------------------

def test_pair_keys_are_symmetric_and_bound_to_the_session():
    keys, participants = owners(["a", "b", "c"])
    pk = all_pair_keys(keys, participants)
    assert set(pk["a"]) == {"b", "c"}
    assert pk["a"]["b"] == pk["b"]["a"] and pk["a"]["c"] == pk["c"]["a"] and pk["b"]["c"] == pk["c"]["b"]
    assert len({pk["a"]["b"], pk["a"]["c"], pk["b"]["c"]}) == 3 and all(len(k) == 32 for k in pk["a"].values())
    other_plan = all_pair_keys(keys, participants, plan="plan-2")
    assert other_plan["a"]["b"] != pk["a"]["b"]
    bigger = {**participants, "d": KeyAgreementKey.generate().public_hex()}
    assert pair_keys("a", keys["a"], bigger, context=session_context(PLAN, bigger))["b"] != pk["a"]["b"]
    # the same list in another order or hex case is the same session
    shuffled = {n: participants[n].upper() for n in reversed(list(participants))}
    assert session_context(PLAN, shuffled) == session_context(PLAN, participants)
    assert pair_keys("a", keys["a"], shuffled, context=session_context(PLAN, shuffled)) == pk["a"]
    # a single owner has no pair keys
    solo = {"a": participants["a"]}
    assert pair_keys("a", keys["a"], solo, context=session_context(PLAN, solo)) == {}


def test_key_agreement_key_round_trips_and_generates_distinct_keys():
    k = KeyAgreementKey.generate()
    again = KeyAgreementKey.from_private_bytes(k.private_bytes())
    assert again.public_hex() == k.public_hex() and len(k.public_hex()) == 64
    assert KeyAgreementKey.generate().public_hex() != k.public_hex()
    with pytest.raises(ProtocolError, match="not 31"):
        KeyAgreementKey.from_private_bytes(bytes(31))


def test_pair_keys_refuse_a_list_that_is_not_the_owners():
    keys, participants = owners(["a", "b", "c"])
    ctx = session_context(PLAN, participants)
    stranger = KeyAgreementKey.generate().public_hex()
    with pytest.raises(ProtocolError, match=f"'a'.*{stranger}.*not the owner's own"):
        pair_keys("a", keys["a"], {**participants, "a": stranger}, context=ctx)
    with pytest.raises(ProtocolError, match="'z' is not in the participant list"):
        pair_keys("z", keys["a"], participants, context=ctx)
    # the owner's own key listed under a second name
    with pytest.raises(ProtocolError, match="'a' and 'd' hold the same"):
        pair_keys("a", keys["a"], {**participants, "d": participants["a"]}, context=ctx)
    with pytest.raises(ProtocolError, match="'a' and 'd' hold the same"):
        session_context(PLAN, {**participants, "d": participants["a"]})
    for bad in ["zz" * 32, "ab" * 31, "ab" * 33, " " + "ab" * 32]:
        with pytest.raises(ProtocolError, match=f"owner 'b'.*{bad!r}"):
            pair_keys("a", keys["a"], {**participants, "b": bad}, context=ctx)
        with pytest.raises(ProtocolError, match=f"owner 'b'.*{bad!r}"):
            parse_public_hex(bad, owner="b")
    with pytest.raises(ProtocolError, match="owner 'b'.*low-order"):
        pair_keys("a", keys["a"], {**participants, "b": "00" * 32}, context=ctx)
    with pytest.raises(ProtocolError, match="plan id"):
        session_context("", participants)
    with pytest.raises(ProtocolError, match="empty"):
        session_context(PLAN, {})


def test_mask_streams_differ_by_label_and_key_and_are_deterministic():
    key, other = bytes(range(32)), bytes(range(1, 33))
    s = mask_stream(key, "round-1", 8)
    assert s.dtype == np.uint64 and s.shape == (8,)
    np.testing.assert_array_equal(s, mask_stream(key, "round-1", 8))
    np.testing.assert_array_equal(s[:3], mask_stream(key, "round-1", 3))
    assert not np.array_equal(s, mask_stream(key, "round-2", 8))
    assert not np.array_equal(s, mask_stream(other, "round-1", 8))
    assert mask_stream(key, "x", 0).shape == (0,)
    with pytest.raises(ProtocolError, match="32 bytes"):
        mask_stream(bytes(16), "x", 1)


# --- 5. the wire encoding --------------------------------------------------------------------------------

def test_encode_decode_round_trip():
    v = np.array([0, 1, 2**63, MODULUS - 1, 12345], dtype=np.uint64)
    text = encode_vector(v)
    assert isinstance(text, str) and len(text) == 4 * ((8 * 5 + 2) // 3)
    back = decode_vector(text, 5, owner="a", what="masked counts")
    assert back.dtype == np.uint64
    np.testing.assert_array_equal(back, v)
    assert decode_vector(encode_vector(np.zeros(0, np.uint64)), 0, owner="a", what="x").shape == (0,)


def test_decode_refuses_a_wrong_length_or_bad_text_naming_the_owner():
    text = encode_vector(np.arange(4, dtype=np.uint64))
    with pytest.raises(ProtocolError, match="owner 'b': masked counts holds 32 bytes, not 40"):
        decode_vector(text, 5, owner="b", what="masked counts")
    with pytest.raises(ProtocolError, match="owner 'b': masked counts '!!!' is not base64"):
        decode_vector("!!!", 5, owner="b", what="masked counts")
    with pytest.raises(ProtocolError, match="uint64"):
        encode_vector(np.arange(4))


def test_module_takes_its_entropy_from_the_rng_package():
    """KeyAgreementKey.generate is the one draw, through fragrelease.rng.secure (the OS CSPRNG)."""
    assert secagg.secure_bytes.__module__ == "fragrelease.rng.secure"
