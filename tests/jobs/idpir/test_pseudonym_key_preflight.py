"""Pseudonym keys are checked before Spark starts (no data needed): fragrelease.jobs.protocol.preflight."""
import pytest

from fragrelease.errors import PseudonymKeyError
from fragrelease.jobs.protocol.preflight import preflight
from fragrelease.protocol.config import config_from_dict


def cfg(tmp_path, **owner):
    src = tmp_path / "src.parquet"
    src.write_bytes(b"")
    return config_from_dict(dict(
        name="pf", dataset="adult", fragmentation="horizontal", epsilon="1", k=5,
        owners=[{"name": n, "source": {"path": str(src)}, **owner} for n in ("a", "b")],
        work_dir=str(tmp_path / "work"), output=str(tmp_path / "out")))


def test_configured_keys_are_read_before_spark(tmp_path, monkeypatch):
    monkeypatch.delenv("PF_KEY", raising=False)
    c = cfg(tmp_path, pseudonym_key={"env": "PF_KEY"})
    for party in ("run", "owner"):
        with pytest.raises(PseudonymKeyError, match="^owner 'a': pseudonym key environment variable 'PF_KEY' is not set$"):
            preflight(c, party=party, owner="a")
    monkeypatch.setenv("PF_KEY", "x" * 32)
    preflight(c, party="run")
    preflight(c, party="owner", owner="b")
    preflight(c, party="aggregator")  # the aggregator never needs the key


def test_an_owner_step_alone_needs_a_key_unless_owners_share_one_private_root(tmp_path):
    separate = cfg(tmp_path)
    separate = config_from_dict({**separate.model_dump(mode="json", exclude_none=True),
                                 "owners": [{**o.model_dump(mode="json", exclude_none=True),
                                             "private_dir": str(tmp_path / f"p-{o.name}")} for o in separate.owners]})
    with pytest.raises(PseudonymKeyError, match="owner 'a' has no pseudonym_key in its configuration"):
        preflight(separate, party="owner", owner="a")
    preflight(separate, party="run")  # the single-command release generates the key
    preflight(cfg(tmp_path), party="owner", owner="a")  # one private root: the owner step creates it
