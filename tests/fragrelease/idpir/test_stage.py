"""The owner's stage as objects (fragrelease.idpir.stage): what reaches the executors and the numpy reference."""
from fractions import Fraction

import numpy as np
import pytest
from noise_injection import HashedLaplace

from fragrelease.errors import InvalidParameterError
from fragrelease.idpir.category_order import AttributeBudget
from fragrelease.idpir.mechanisms import MECHANISMS, draw_task, get_mechanism, protect_attribute
from fragrelease.idpir.microaggregation import cluster_count, cluster_cut, cluster_of_rank
from fragrelease.idpir.postprocess import finish_centroids
from fragrelease.idpir.spec import protection_spec
from fragrelease.idpir.stage import AttributeTask, StageSpec, resolve_k
from fragrelease.protocol.options import ReleaseOptions
from fragrelease.schemas.base import Attribute


def test_the_cluster_cut_is_min_rank_over_k_and_the_last_cluster():
    for n in range(1, 30):
        for k in range(1, n + 1):
            c = cluster_count(n, k)
            ranks = np.arange(n)
            want = np.array([min(r // k, c - 1) for r in ranks])
            assert np.array_equal(cluster_cut(ranks, k, c), want)
            assert np.array_equal(cluster_of_rank(ranks, n, k), want)
            assert np.array_equal(StageSpec(get_mechanism("dp-ir"), k, n).cluster_of(ranks), want)
            assert int(cluster_cut(n - 1, k, c)) == c - 1  # a scalar rank: the last rank is in the last cluster


def test_the_stage_resolves_k_once_and_derives_c():
    idp, idp_ir = get_mechanism("idp"), get_mechanism("idp-ir")
    assert resolve_k(idp, 25) == 1 and resolve_k(idp_ir, 25) == 25
    stage = StageSpec.build(idp, 25, 100)
    assert (stage.k, stage.n, stage.c) == (1, 100, 100)
    stage = StageSpec.build(idp_ir, 25, 110, ReleaseOptions.of(postprocess="none"))
    assert (stage.k, stage.c, stage.options.postprocess) == (25, 4, "none")
    with pytest.raises(InvalidParameterError, match=r"^k must be <= the number of records n = 10, not 25$"):
        StageSpec.build(idp_ir, 25, 10)
    with pytest.raises(TypeError):
        StageSpec(idp_ir, 3, 10, ReleaseOptions(), c=2)  # type: ignore[call-arg]  # c is derived, never given


def test_an_owners_spec_becomes_one_stage_and_one_task_per_attribute():
    spec = protection_spec(owner="a", dataset="d", plan_id="p", attributes=[("age", False), ("sex", True)],
                           mechanism="idp", k=20, epsilon=Fraction(1), n_records=500,
                           options=ReleaseOptions.of(postprocess="none"))
    stage = StageSpec.of(spec)
    assert (stage.mechanism.name, stage.k, stage.n, stage.c) == ("idp", 1, 500, 500)
    assert stage.options == spec.options and spec.k_used == stage.k
    age = Attribute(name="age", type="double", role="quasi-identifier", kind="numeric",
                    domain=[17, 90])
    task = AttributeTask.of(age, spec.budget("age"))
    assert task == AttributeTask("age", 17.0, 90.0, False, Fraction(1, 2))
    with pytest.raises(InvalidParameterError, match=r"^the budget of 'sex' is not for attribute 'age'$"):
        AttributeTask.of(age, spec.budget("sex"))
    assert AttributeTask.of(age, AttributeBudget(attribute="age", epsilon=Fraction(1, 2), epsilon_order=0, epsilon_centroids=Fraction(1, 2))).epsilon == Fraction(1, 2)


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
@pytest.mark.parametrize("postprocess", ["isotonic", "none"])
def test_draw_task_is_the_numpy_reference(mechanism, postprocess):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 50, 203).astype(float)
    ids = rng.permutation(203)
    options = ReleaseOptions.of(postprocess=postprocess)
    stage = StageSpec.build(get_mechanism(mechanism), 7, x.size, options)
    task = AttributeTask("v", 0.0, 50.0, False, Fraction(1, 3))
    order, clusters, noisy, sizes = draw_task(x, task, stage, HashedLaplace("stage"), tiebreak=ids)
    assert np.array_equal(clusters[order], stage.cluster_of(np.arange(x.size)))
    assert noisy.shape == sizes.shape == (stage.c,) and sizes.sum() == x.size
    released = stage.finish(noisy, sizes, task)[clusters]
    ref = protect_attribute(x, AttributeTask("v", 0.0, 50.0, categorical=False, epsilon=Fraction(1, 3)),
                            k=7, mechanism=mechanism, noise=HashedLaplace("stage"), tiebreak=ids,
                            options=ReleaseOptions.of(postprocess=postprocess))
    assert np.array_equal(released, ref)
    with pytest.raises(InvalidParameterError, match=r"^attribute 'v' has 202 values, the stage 203$"):
        draw_task(x[1:], task, stage, HashedLaplace("stage"))


def test_post_processing_takes_the_options_not_a_string():
    noisy, sizes = np.array([3.4, 1.2, 2.2]), np.array([5.0, 5.0, 6.0])
    task = AttributeTask("r", 1.0, 4.0, True, Fraction(1))
    for post in ("isotonic", "none"):
        options = ReleaseOptions.of(postprocess=post)
        stage = StageSpec.build(get_mechanism("dp-ir"), 3, 16, options)
        assert np.array_equal(stage.finish(noisy, sizes, task), finish_centroids(noisy, sizes, 1.0, 4.0, True, options))
    assert list(finish_centroids(noisy, sizes, 1.0, 4.0, True, ReleaseOptions.of(postprocess="none"))) == [3.0, 1.0, 2.0]
    with pytest.raises(InvalidParameterError, match=r"^finish_centroids takes the release options, not str$"):
        finish_centroids(noisy, sizes, 1.0, 4.0, True, "none")  # type: ignore[arg-type]
