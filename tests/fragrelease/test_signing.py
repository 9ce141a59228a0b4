"""The Spark-free signing core (fragrelease.signing): keys, canonical payload, sign and verify,
private key file checks, and the ``fragrelease keys generate`` command."""
import base64
import json
import os
import stat

import pytest

from fragrelease.errors import ConfigError, SignatureError, SigningKeyError
from fragrelease.jobs.protocol.context import owner_context
from fragrelease.signing import (
    MANIFEST_DOMAIN,
    generate_private_key,
    load_private_key,
    manifest_payload,
    parse_public_key,
    public_key_text,
    sign_manifest_fields,
    verify_manifest_fields,
    write_key_pair,
)

FIELDS = {
    "plan_id": "p-1", "owner": "a", "dataset": "wine", "content_digest": "sha256-sum60:150:123",
    "files": [{"path": "part-0.parquet", "size": 100, "sha256": "00" * 32}], "k": 10, "epsilon": "1",
    "attributes": [{"name": "alcohol", "kind": "numeric"}], "table_version": 0,
}


def test_payload_is_canonical_and_domain_separated():
    p = manifest_payload(FIELDS)
    assert p.startswith(MANIFEST_DOMAIN)
    # the same fields in another order give the same bytes; the body is sorted, compact JSON
    assert manifest_payload(dict(reversed(list(FIELDS.items())))) == p
    assert json.loads(p[len(MANIFEST_DOMAIN):]) == FIELDS
    assert b" " not in p[len(MANIFEST_DOMAIN):].replace(b"sha256-sum60", b"")
    with pytest.raises(SignatureError, match="signature"):
        manifest_payload({**FIELDS, "signature": "x"})
    with pytest.raises(SignatureError, match="files"):
        manifest_payload({k: v for k, v in FIELDS.items() if k != "files"})


def test_signature_verifies_and_every_changed_field_fails():
    key = generate_private_key()
    pub = parse_public_key(public_key_text(key), owner="a")
    sig = sign_manifest_fields(key, FIELDS)
    verify_manifest_fields(pub, FIELDS, sig, owner="a")
    tampered = [
        {**FIELDS, "owner": "b"}, {**FIELDS, "plan_id": "p-2"}, {**FIELDS, "dataset": "adult"},
        {**FIELDS, "content_digest": "sha256-sum60:150:124"}, {**FIELDS, "epsilon": "2"},
        {**FIELDS, "files": [{"path": "part-0.parquet", "size": 101, "sha256": "00" * 32}]},
        {**FIELDS, "files": [{"path": "part-0.parquet", "size": 100, "sha256": "01" + "00" * 31}]},
        {**FIELDS, "files": []}, {**FIELDS, "table_version": 1}, {**FIELDS, "extra": 1},
    ]
    for fields in tampered:
        with pytest.raises(SignatureError, match="does not verify under the public key configured for owner 'a'"):
            verify_manifest_fields(pub, fields, sig, owner="a")
    # the signature is over the domain-separated payload, not the bare JSON
    raw = base64.b64decode(sig)
    body = manifest_payload(FIELDS)[len(MANIFEST_DOMAIN):]
    from cryptography.exceptions import InvalidSignature

    with pytest.raises(InvalidSignature):
        pub.verify(raw, body)


def test_wrong_key_missing_or_malformed_signature_fail():
    key, other = generate_private_key(), generate_private_key()
    sig = sign_manifest_fields(other, FIELDS)
    pub = parse_public_key(public_key_text(key), owner="a")
    with pytest.raises(SignatureError, match="signed with another key"):
        verify_manifest_fields(pub, FIELDS, sig, owner="a")
    with pytest.raises(SignatureError, match="manifest of owner 'a' is not signed"):
        verify_manifest_fields(pub, FIELDS, None, owner="a")
    with pytest.raises(SignatureError, match="malformed signature"):
        verify_manifest_fields(pub, FIELDS, "not base64!", owner="a")
    with pytest.raises(SignatureError, match="malformed signature"):
        verify_manifest_fields(pub, FIELDS, base64.b64encode(b"x" * 63).decode(), owner="a")


def test_keys_are_fresh_and_public_keys_parse_strictly():
    a, b = generate_private_key(), generate_private_key()
    assert public_key_text(a) != public_key_text(b)
    text = public_key_text(a)
    assert len(text) == 44 and len(base64.b64decode(text)) == 32
    with pytest.raises(SigningKeyError, match="owner 'a': public_key 'abc!' is not base64"):
        parse_public_key("abc!", owner="a")
    with pytest.raises(SigningKeyError, match="decodes to 3 bytes"):
        parse_public_key(base64.b64encode(b"abc").decode(), owner="a")


def test_key_files_are_private_and_never_overwritten(tmp_path):
    folder = tmp_path / "keys"
    path, pub = write_key_pair(str(folder), "a")
    assert path == str(folder / "a.key")
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert open(path).read().startswith("-----BEGIN PRIVATE KEY-----")
    key = load_private_key(path, owner="a")
    assert public_key_text(key) == pub
    before = open(path, "rb").read()
    with pytest.raises(SigningKeyError, match="exists already"):
        write_key_pair(str(folder), "a")
    assert open(path, "rb").read() == before


def test_unsafe_private_key_files_are_refused_naming_the_owner(tmp_path):
    path, _ = write_key_pair(str(tmp_path / "keys"), "a")
    for mode in (0o640, 0o604, 0o660, 0o644):
        os.chmod(path, mode)
        with pytest.raises(SigningKeyError) as exc:
            load_private_key(path, owner="a")
        assert str(exc.value) == (f"owner 'a': signing_key '{path}' is readable or writable by group or others "
                                  f"(mode {mode:04o}); run 'chmod 600 {path}'")
    os.chmod(path, 0o400)
    load_private_key(path, owner="a")
    # under a shared folder: refused whatever its mode
    with pytest.raises(SigningKeyError, match="lies under the shared work_dir"):
        load_private_key(path, owner="a", shared={"work_dir": str(tmp_path)})
    with pytest.raises(SigningKeyError, match="does not exist"):
        load_private_key(str(tmp_path / "none.key"), owner="a")
    bad = tmp_path / "keys" / "bad.key"
    bad.write_text("not a key")
    os.chmod(bad, 0o600)
    with pytest.raises(SigningKeyError, match="owner 'a': signing_key .* is not a PEM file"):
        load_private_key(str(bad), owner="a")
    bad.write_text("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")  # a PEM block, damaged
    with pytest.raises(SigningKeyError, match=r"owner 'a': signing_key .* is not an unencrypted PEM private key "
                                              r"\(Could not deserialize key data\)$"):
        load_private_key(str(bad), owner="a")


def _cfg(tmp_path, **owner_b):
    from fragrelease.protocol.config import config_from_dict

    return config_from_dict(dict(name="s", dataset="wine", fragmentation="horizontal", epsilon="1", k=10,
                                 owners=[{"name": "a", "rows": 3000}, {"name": "b", "rows": 3497, **owner_b}],
                                 work_dir=str(tmp_path / "work"), output=str(tmp_path / "out")))


def test_configuration_refuses_bad_public_keys_and_keys_in_shared_folders(tmp_path):
    with pytest.raises(ConfigError, match=r"owners\[1\]\.public_key: owner 'b': public_key 'xyz' is not base64"):
        _cfg(tmp_path, public_key="xyz")
    with pytest.raises(ConfigError, match=r"owners\[1\]\.signing_key: owner 'b': signing_key .* lies under the shared work_dir"):
        _cfg(tmp_path, signing_key=str(tmp_path / "work" / "b.key"))
    with pytest.raises(ConfigError, match=r"lies under the shared output"):
        _cfg(tmp_path, signing_key=str(tmp_path / "out" / "keys" / "b.key"))
    path, pub = write_key_pair(str(tmp_path / "keys"), "b")
    cfg = _cfg(tmp_path, signing_key=path, public_key=pub)
    assert (cfg.owners[1].signing_key, cfg.owners[1].public_key) == (path, pub)


def test_owner_key_must_match_its_public_key(tmp_path):
    from fragrelease.jobs.protocol.signatures import owner_signing_key

    path, _ = write_key_pair(str(tmp_path / "keys"), "b")
    other = public_key_text(generate_private_key())
    cfg = _cfg(tmp_path, signing_key=path, public_key=other)
    with pytest.raises(SigningKeyError, match="does not belong to the configured public_key"):
        owner_signing_key(owner_context(cfg, cfg.owners[1].name))
    with pytest.raises(SigningKeyError, match="owner 'a' has no signing_key"):
        owner_signing_key(owner_context(cfg, cfg.owners[0].name))


def test_keys_generate_command(tmp_path, capsys):
    from fragrelease.jobs.cli import run_cli

    out = tmp_path / "k"
    assert run_cli(["keys", "generate", "--owner", "clinic-1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    path = out / "clinic-1.key"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and stat.S_IMODE(os.stat(out).st_mode) == 0o700
    line = next(x for x in printed.splitlines() if x.strip().startswith("public_key:"))
    pub = line.split(":", 1)[1].strip()
    assert public_key_text(load_private_key(str(path), owner="clinic-1")) == pub
    assert f"signing_key: {path}" in printed
    # a second run never overwrites the key: exit 2, one line
    assert run_cli(["keys", "generate", "--owner", "clinic-1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "exists already" in err and len(err.strip().splitlines()) == 1


def test_owner_protect_refuses_an_unsafe_key_before_spark(tmp_path, capsys, monkeypatch):
    import yaml

    from fragrelease.jobs import session
    from fragrelease.jobs.cli import run_cli

    def no_spark(*a, **k):
        raise AssertionError("a SparkSession was requested before the key was checked")

    monkeypatch.setattr(session, "get_spark", no_spark)

    path, pub = write_key_pair(str(tmp_path / "keys"), "owner-1")
    os.chmod(path, 0o644)
    conf = yaml.safe_load(open("conf/adult-horizontal.yaml"))
    conf["owners"][0].update(signing_key=path, public_key=pub)
    conf["work_dir"], conf["output"] = str(tmp_path / "work"), str(tmp_path / "out")
    cfile = tmp_path / "c.yaml"
    cfile.write_text(yaml.safe_dump(conf))
    assert run_cli(["owner", "protect", "--config", str(cfile), "--owner", "owner-1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err == (f"error: owner 'owner-1': signing_key '{path}' is readable or writable by group or others "
                   f"(mode 0644); run 'chmod 600 {path}'")
