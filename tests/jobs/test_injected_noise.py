"""Seeded noise stays in tests (issue 49 item 5): ``_noise`` is refused outside a pytest run.

``Release.run(_noise=…)``, ``protect(_noise=…)`` and the local driver's ``noise`` accept an injected
noise source only while pytest runs a test (``PYTEST_CURRENT_TEST``); otherwise they refuse it with one
line naming the parameter, before any Spark action, so a real release never carries seeded noise
that its provenance would not mention. Spark-free: the refusal comes first.
"""
import pytest
from noise_injection import SeededLaplace

from fragrelease.errors import InvalidParameterError
from fragrelease.jobs.api import Release, protect
from fragrelease.rng.laplace import TEST_MARKER, refuse_injected_noise


class NoSpark:
    """A session stand-in that fails the test if anything touches it."""

    def __getattr__(self, name):
        raise AssertionError(f"Spark was used ({name}) before the refusal")


def test_injected_noise_is_refused_outside_a_test_run(monkeypatch):
    monkeypatch.delenv(TEST_MARKER, raising=False)
    release = Release("adult", epsilon=1, k=5, spark=NoSpark())
    with pytest.raises(InvalidParameterError, match=r"^_noise=SeededLaplace is for tests only .*drop _noise$"):
        release.run(_noise=SeededLaplace(1))
    with pytest.raises(InvalidParameterError, match="_noise=SeededLaplace is for tests only"):
        protect(NoSpark(), "adult", epsilon=1, k=5, _noise=SeededLaplace(1))
    from fragrelease.jobs.protocol.release import play_release

    with pytest.raises(InvalidParameterError, match="noise=SeededLaplace is for tests only"):
        play_release(NoSpark(), None, noise=SeededLaplace(1))  # before the configuration is read


def test_injected_noise_is_accepted_under_pytest_and_none_always(monkeypatch):
    refuse_injected_noise(SeededLaplace(1), parameter="_noise")  # pytest sets the marker while a test runs
    monkeypatch.delenv(TEST_MARKER, raising=False)
    refuse_injected_noise(None, parameter="_noise")  # the release's own samplers always pass
