"""Keyed pseudonyms (fragrelease.pseudonyms): HMAC-SHA-256 known answers, keys and their refusals."""
import hashlib
import hmac as std_hmac
import os
import stat

import pytest

from fragrelease.errors import ConfigError, PseudonymKeyError
from fragrelease.protocol.config import config_from_dict
from fragrelease.pseudonyms import (
    KEY_DERIVATION_INFO,
    KEY_DERIVATION_SALT,
    MIN_KEY_BYTES,
    canonical_id_text,
    derive_key,
    hmac_sha256,
    key_check,
    new_key_text,
    pseudonym,
    pseudonyms,
    read_key_env,
    read_key_file,
    write_key_file,
)

# RFC 4231 §4.7 (test case 6) and §4.8 (test case 7): keys of 131 bytes, longer than a block
RFC_KEY = b"\xaa" * 131
RFC_CASES = [
    ("Test Using Larger Than Block-Size Key - Hash Key First",
     "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
    ("This is a test using a larger than block-size key and a larger than block-size data. The key needs to be "
     "hashed before being used by the HMAC algorithm.",
     "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
]


@pytest.mark.parametrize("text,expected", RFC_CASES)
def test_pseudonym_of_a_text_id_is_rfc_4231_hmac_sha256(text, expected):
    # the id text is the HMAC message (no context): the function's key/bytes path gives the RFC's answer
    assert pseudonym(RFC_KEY, text) == expected
    assert pseudonyms(RFC_KEY, [text, text]) == [expected, expected]
    assert hmac_sha256(RFC_KEY, text.encode()).hex() == expected


def test_rfc_4231_case_2_through_the_core_hmac():
    # key "Jefe" (short: accepted by the bare HMAC, refused as a pseudonym key)
    assert hmac_sha256(b"Jefe", b"what do ya want for nothing?").hex() == (
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    with pytest.raises(PseudonymKeyError, match="is 4 bytes; at least 32 are required"):
        pseudonym(b"Jefe", "x")


def test_context_and_integer_ids_against_pythons_hmac():
    key = bytes(range(40))
    ref = std_hmac.new(key, b"plan-1\x0042", hashlib.sha256).hexdigest()
    assert pseudonym(key, 42, context="plan-1") == pseudonym(key, "42", context="plan-1") == ref
    assert pseudonym(key, 42, context="plan-2") != ref  # a new plan id, new pseudonyms
    assert pseudonym(key, 42) == std_hmac.new(key, b"42", hashlib.sha256).hexdigest()
    assert pseudonym(bytes(range(1, 41)), 42, context="plan-1") != ref  # another key
    assert canonical_id_text(7) == "7" and canonical_id_text("a7") == "a7"
    with pytest.raises(PseudonymKeyError):
        canonical_id_text(None)


def test_key_check_tells_keys_apart_without_showing_them():
    k1, k2 = new_key_text(), new_key_text()
    assert len(k1) == 64 and k1 != k2  # 32 CSPRNG bytes, hex
    assert key_check(k1) == key_check(bytes(k1)) != key_check(k2)
    assert k1.decode() not in key_check(k1)


def test_key_file_and_environment_refusals(tmp_path):
    missing = str(tmp_path / "nope.key")
    with pytest.raises(PseudonymKeyError) as e:
        read_key_file(missing, owner="clinic-a")
    assert str(e.value) == f"owner 'clinic-a': pseudonym key file {missing!r} cannot be read: No such file or directory"
    short = tmp_path / "short.key"
    short.write_bytes(b"0123456789abcdef\n")  # 16 bytes after the line break
    short.chmod(0o600)
    with pytest.raises(PseudonymKeyError) as e:
        read_key_file(str(short), owner="clinic-a")
    assert str(e.value) == (f"owner 'clinic-a': pseudonym key from file {str(short)!r} is 16 bytes; "
                            f"at least {MIN_KEY_BYTES} are required")
    good = tmp_path / "good.key"
    good.write_bytes(b"k" * 32 + b"\n")
    good.chmod(0o600)
    assert read_key_file(str(good), owner="a") == derive_key(b"k" * 32)  # the secret, through HKDF
    with pytest.raises(PseudonymKeyError) as e:
        read_key_env("FR_TEST_KEY", owner="clinic-b", environ={})
    assert str(e.value) == "owner 'clinic-b': pseudonym key environment variable 'FR_TEST_KEY' is not set"
    with pytest.raises(PseudonymKeyError, match="environment variable 'FR_TEST_KEY' is 3 bytes"):
        read_key_env("FR_TEST_KEY", owner="clinic-b", environ={"FR_TEST_KEY": "abc"})
    assert read_key_env("FR_TEST_KEY", owner="b", environ={"FR_TEST_KEY": "z" * 33}) == derive_key(b"z" * 33)


def test_generated_key_files_are_private_and_created_once(tmp_path):
    path = str(tmp_path / "priv" / "pseudonym-key")
    assert write_key_file(path, b"a" * 64, exclusive=True)
    assert not write_key_file(path, b"b" * 64, exclusive=True)  # a second party reads the first one's key
    assert open(path, "rb").read() == b"a" * 64
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    write_key_file(path, b"c" * 64)  # the single-command release: a fresh key per release
    assert open(path, "rb").read() == b"c" * 64 and os.listdir(os.path.dirname(path)) == ["pseudonym-key"]


def _cfg(tmp_path, **owner_a):
    return dict(name="r", dataset="adult", fragmentation="horizontal", epsilon="1", k=5,
                owners=[{"name": "a", "rows": 10, **owner_a}, {"name": "b", "rows": 10, **owner_a}],
                work_dir=str(tmp_path / "work"), output=str(tmp_path / "out"))


def test_configuration_refuses_a_key_under_work_dir_or_output_and_keys_on_some_owners_only(tmp_path):
    inside = str(tmp_path / "work" / "owners" / "k.key")
    with pytest.raises(ConfigError, match=r"owner 'a': pseudonym key file .*k\.key' lies under the shared work_dir"):
        config_from_dict(_cfg(tmp_path, pseudonym_key={"file": inside}))
    with pytest.raises(ConfigError, match="lies under the shared output"):
        config_from_dict(_cfg(tmp_path, pseudonym_key={"file": str(tmp_path / "out" / "k")}))
    with pytest.raises(ConfigError, match="exactly one of 'file' and 'env'"):
        config_from_dict(_cfg(tmp_path, pseudonym_key={"file": "/k", "env": "K"}))
    with pytest.raises(ConfigError, match="Extra inputs|extra"):
        config_from_dict(_cfg(tmp_path, pseudonym_key={"path": "/k"}))
    data = _cfg(tmp_path)
    data["owners"][0]["pseudonym_key"] = {"env": "K"}
    with pytest.raises(ConfigError, match="owner 'b' names no pseudonym key while 'a' does"):
        config_from_dict(data)
    ok = config_from_dict(_cfg(tmp_path, pseudonym_key={"env": "K"}))
    assert ok.owners[0].pseudonym_key.where == "environment variable 'K'"


def _hkdf_sha256_by_hand(ikm: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869 §2.2-2.3 with the standard library's hmac: a second implementation, not cryptography's."""
    prk = std_hmac.new(salt, ikm, hashlib.sha256).digest()
    okm, block, i = b"", b"", 1
    while len(okm) < length:
        block = std_hmac.new(prk, block + info + bytes([i]), hashlib.sha256).digest()
        okm, i = okm + block, i + 1
    return okm[:length]


def test_hand_hkdf_matches_rfc_5869_test_case_1():
    """The hand implementation itself, on RFC 5869 Appendix A.1's vector."""
    ikm = bytes.fromhex("0b" * 22)
    salt = bytes.fromhex("000102030405060708090a0b0c")
    info = bytes.fromhex("f0f1f2f3f4f5f6f7f8f9")
    assert _hkdf_sha256_by_hand(ikm, salt, info, 42).hex() == (
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")


def test_the_key_is_hkdf_sha256_of_the_secret_never_the_secret_itself():
    secret = b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"  # openssl rand -hex 32 shape
    key = derive_key(secret)
    assert key == _hkdf_sha256_by_hand(secret, KEY_DERIVATION_SALT, KEY_DERIVATION_INFO, 32)
    assert len(key) == 32 and key != secret and key != secret[:32]
    assert derive_key(secret + b"0") != key
    with pytest.raises(PseudonymKeyError, match="is 31 bytes; at least 32 are required"):
        derive_key(b"x" * 31, owner="a", where="file 'k'")


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o606])
def test_a_key_file_others_may_read_or_write_is_refused(tmp_path, mode):
    path = tmp_path / "k.key"
    path.write_bytes(b"f" * 64)
    path.chmod(mode)
    with pytest.raises(PseudonymKeyError) as e:
        read_key_file(str(path), owner="clinic-a")
    assert str(e.value) == (f"owner 'clinic-a': pseudonym key file {str(path)!r} is readable or writable by group "
                            f"or others (mode {mode:04o}); run 'chmod 600 {path}'")
    path.chmod(0o600)
    assert read_key_file(str(path), owner="clinic-a") == derive_key(b"f" * 64)
    path.chmod(0o400)
    assert read_key_file(str(path), owner="clinic-a") == derive_key(b"f" * 64)


def test_key_folder_that_exists_open_to_others_is_refused_and_not_chmodded(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o755)
    with pytest.raises(PseudonymKeyError) as e:
        write_key_file(str(folder / "pseudonym-key"), b"a" * 64, owner="a")
    assert str(e.value) == (f"owner 'a': private folder {str(folder)!r} is readable or writable by group or others "
                            f"(mode 0755); run 'chmod 700 {folder}'")
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o755 and os.listdir(folder) == []


def test_a_guessed_secret_is_confirmed_offline_by_the_public_key_check():
    """docs/privacy.md: the key check is public, so a guessable secret is found by trying guesses (HKDF adds no
    work factor); hence the advice to make it random."""
    secret = b"correct horse battery staple, correct horse!"  # a passphrase of 44 bytes passes the length check
    published = key_check(derive_key(secret))
    guesses = [b"password" * 4, b"correct horse battery staple, correct horse!", b"x" * 40]
    assert [g for g in guesses if key_check(derive_key(g)) == published] == [secret]


def test_the_release_context_changes_with_every_owner_nonce_and_not_with_their_order():
    """Issue 36 item 6: the pseudonym context is the plan id with the owners' nonces, which no single party chooses."""
    from fragrelease.protocol.messages import OwnerMetadata, make_plan
    from fragrelease.pseudonyms import NONCE_BYTES, new_nonce, release_context

    n1, n2, n3 = new_nonce(), new_nonce(), new_nonce()
    assert len({n1, n2, n3}) == 3 and len(bytes.fromhex(n1)) == NONCE_BYTES
    assert release_context("plan-1", [n1, n2]) == release_context("plan-1", [n2, n1]) == f"plan-1|{min(n1, n2)}|{max(n1, n2)}"
    # the same plan id (an aggregator reusing one) with one fresh nonce: another context, other pseudonyms
    assert release_context("plan-1", [n1, n3]) != release_context("plan-1", [n1, n2])
    key = b"k" * 32
    assert pseudonym(key, 1006, context=release_context("plan-1", [n1, n2])) != \
        pseudonym(key, 1006, context=release_context("plan-1", [n1, n3]))
    assert release_context("plan-1", [None, None]) == "plan-1"  # metadata without nonces (an older fragrelease)
    attrs = ({"name": "age", "kind": "numeric", "domain": [0.0, 100.0]},)
    metas = [OwnerMetadata(owner=o, dataset="d", fragmentation="horizontal", attributes=attrs, n_records=10,
                           nonce=n) for o, n in (("b", n2), ("a", n1))]
    plan = make_plan(metas, fragmentation="horizontal", mechanism="idp-ir", k=3, epsilon="1")
    assert [(o.name, o.nonce) for o in plan.owners] == [("b", n2), ("a", n1)]  # copied from the metadata
    assert plan.pseudonym_context() == release_context(plan.plan_id, [n1, n2])
