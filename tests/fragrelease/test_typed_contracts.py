"""Contracts that the mypy pass on ``fragrelease/`` made explicit (issue 14).

- DistDiffGen's ``run_party`` takes any :class:`fragrelease.diffgen.two_party.PartyData`; the in-memory
  ``PartyInput`` and the Spark-backed ``SparkParty`` must both provide every member of it, with the
  same parameters (mypy checks ``fragrelease/`` alone, so this guards the Spark side).
- A Spark party process without an exchange folder is refused before any SparkSession starts.
- Optional fields that an invariant makes present are read through accessors that raise by name.
"""
from __future__ import annotations

import inspect
import os

import numpy as np
import pytest

from fragrelease.diffgen.params import ProtocolParams
from fragrelease.diffgen.two_party import PartyData, PartyInput
from fragrelease.errors import ConfigError, InvalidParameterError
from fragrelease.jobs.diffgen.processes import PartyProcess, _party_process
from fragrelease.publications.mondrian import mondrian_partition
from fragrelease.taxonomy import QuasiIdentifier, Taxonomy

PROTOCOL_MEMBERS = ("predictors", "n", "prepare", "ids_digest", "marginal_counts", "encrypt_cells", "sum_cells")


def _members(cls) -> set[str]:
    return {m for m in vars(cls) if not m.startswith("_")}


def test_party_data_protocol_lists_exactly_what_run_party_uses():
    assert _members(PartyData) == set(PROTOCOL_MEMBERS)


@pytest.mark.parametrize("backend", ["pandas", "spark"])
def test_both_party_backends_implement_party_data(backend):
    if backend == "pandas":
        cls = PartyInput
    else:
        from fragrelease.jobs.diffgen.party import SparkParty as cls
    for name in PROTOCOL_MEMBERS:
        want = inspect.getattr_static(PartyData, name)
        if name == "predictors":  # a dataclass field / an instance attribute set in __init__
            assert name in getattr(cls, "__dataclass_fields__", {}) or "self.predictors" in inspect.getsource(cls)
            continue
        got = inspect.getattr_static(cls, name, None)
        assert got is not None, f"{cls.__name__} lacks {name}"
        if isinstance(want, property):
            assert isinstance(got, property), f"{cls.__name__}.{name} must be a property"
            continue
        assert list(inspect.signature(got).parameters) == list(inspect.signature(want).parameters), \
            f"{cls.__name__}.{name} parameters differ from PartyData.{name}"


def test_spark_party_process_without_exchange_dir_is_refused_before_spark_starts(monkeypatch, tmp_path):
    import fragrelease.jobs.session as session

    def no_spark(*a, **kw):
        raise AssertionError("a SparkSession must not start")

    monkeypatch.setattr(session, "get_spark", no_spark)
    monkeypatch.delenv("FRAGRELEASE_DRIVER_MEMORY", raising=False)
    with pytest.raises(InvalidParameterError, match="exchange_dir"):
        _party_process(PartyProcess(role="hospital", attributes=("age",), out_path=str(tmp_path / "out.pkl"),
                                    listen=False, backend="spark", exchange_dir=None),
                       ("127.0.0.1", 1), b"k", ProtocolParams(epsilon=1, specializations=0))
    assert "FRAGRELEASE_DRIVER_MEMORY" not in os.environ  # nothing changed before the refusal


def test_mondrian_l_diversity_without_sensitive_codes_is_refused_by_name():
    codes = [np.arange(10, dtype=float)]
    qi = QuasiIdentifier("x", "numeric", domain=(0.0, 9.0))
    with pytest.raises(InvalidParameterError, match="needs the sensitive codes"):
        mondrian_partition(codes, [qi], None, k=2, l=2)
    parts = mondrian_partition(codes, [qi], None, k=2, l=1)  # ℓ = 1 needs none
    assert min(len(p) for p in parts) >= 2 and sorted(np.concatenate(parts).tolist()) == list(range(10))


def test_quasi_identifier_accessors_return_the_field_or_raise_naming_the_attribute():
    tax = Taxonomy("c", [["a", "*"], ["b", "*"]])
    cat = QuasiIdentifier("colour", "categorical", tax)
    num = QuasiIdentifier("age", "numeric", domain=(0.0, 100.0))
    assert cat.require_taxonomy() is tax
    assert num.require_domain() == (0.0, 100.0)
    with pytest.raises(ConfigError, match="'age' has no taxonomy"):
        num.require_taxonomy()
    with pytest.raises(ConfigError, match="'colour' has no domain"):
        cat.require_domain()
