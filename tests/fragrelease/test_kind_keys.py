"""A configuration says what applies: each release kind refuses the keys it does not act on (issue 52).

The IR kinds (``linkage: linked|unlinked``) require ``k`` and refuse the ``synthesis_*`` keys; the
synthetic kind needs no ``k`` and refuses microaggregation's keys, each with one line naming the key,
the kind and the reason. A key written at its default is accepted (a configuration dumped with every
field reads back); ``k`` has no default, so a synthetic configuration with any ``k`` is refused.
"""
from __future__ import annotations

import pytest

from fragrelease.errors import ConfigError, InvalidParameterError
from fragrelease.idpir.spec import required_k
from fragrelease.kinds import KINDS
from fragrelease.protocol.config import config_from_dict
from fragrelease.protocol.kind import release_kind
from fragrelease.protocol.options import OPTION_NAMES


def _data(**kw):
    data = dict(name="s", dataset="adult-income", fragmentation="horizontal", epsilon="1",
                owners=[{"name": "a", "rows": 20}, {"name": "b", "rows": 20}],
                work_dir="/tmp/fr-test-kind-keys/work", output="/tmp/fr-test-kind-keys/out")
    data.update(kw)
    return data


def test_a_synthetic_configuration_needs_no_k_and_an_owner_smaller_than_any_k_is_fine():
    cfg = config_from_dict(_data(linkage="synthetic", owners=[{"name": "a", "rows": 5}, {"name": "b", "rows": 5}]))
    assert cfg.k is None


@pytest.mark.parametrize("key,value", [("mechanism", "dp-ir"), ("k", 20), ("k", 50), ("category_order", "declared"),
                                       ("category_order_share", "1/5"), ("postprocess", "none")])
def test_a_synthetic_release_refuses_each_microaggregation_key_in_one_line(key, value):
    with pytest.raises(ConfigError) as e:
        config_from_dict(_data(linkage="synthetic", **{key: value}))
    text = str(e.value)
    assert f"{key}: not used by linkage: synthetic" in text and "remove it" in text
    assert len(text.strip().splitlines()) == 1


def test_a_dumped_configuration_reads_back_whatever_its_kind():
    for data in (_data(linkage="synthetic", synthesis_target="income"), _data(linkage="linked", k=10)):
        cfg = config_from_dict(data)
        assert config_from_dict(cfg.model_dump(mode="json", exclude_none=True)) == cfg
    # the defaults of the other kind's keys, written out, are accepted
    config_from_dict(_data(linkage="synthetic", mechanism="idp-ir", postprocess="isotonic", category_order_share="1/10"))
    config_from_dict(_data(linkage="linked", k=10, synthesis_bins=10))


@pytest.mark.parametrize("linkage", ["linked", "unlinked"])
@pytest.mark.parametrize("key,value", [("synthesis_target", "income"), ("synthesis_bins", 12),
                                       ("synthesis_collusion", 1)])
def test_an_ir_release_refuses_each_synthesis_key(linkage, key, value):
    with pytest.raises(ConfigError, match=rf"{key}: not used by linkage: {linkage} \(for linkage: synthetic only"):
        config_from_dict(_data(linkage=linkage, k=10, **{key: value}))


@pytest.mark.parametrize("linkage", ["linked", "unlinked"])
def test_an_ir_release_requires_k(linkage):
    with pytest.raises(ConfigError, match=rf"k: required by linkage: {linkage}"):
        config_from_dict(_data(linkage=linkage))
    assert config_from_dict(_data(linkage=linkage, k=10)).k == 10


def test_every_unused_key_is_a_configuration_key_and_no_kind_refuses_what_it_reads():
    from fragrelease.protocol.config import ReleaseConfig

    for name in KINDS:
        kind = release_kind(name)
        assert set(kind.unused_keys) <= set(ReleaseConfig.model_fields), name
        assert "linkage" not in kind.unused_keys and "epsilon" not in kind.unused_keys
    # every release option is read by some kind: refused by at most all but one
    for option in OPTION_NAMES:
        assert sum(option in release_kind(n).unused_keys for n in KINDS) < len(KINDS), option


def test_microaggregation_refuses_a_missing_k_with_the_kind_named():
    assert required_k(7, linkage="linked") == 7
    with pytest.raises(InvalidParameterError, match="k: required by linkage: synthetic"):
        required_k(None, linkage="synthetic")
