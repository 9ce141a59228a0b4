"""The one package that owns randomness (docs/specification.md §8; seeds only in tests).

Every random draw of a release comes from here, in six modules:

- :mod:`fragrelease.rng.laplace`: Laplace noise. :class:`~fragrelease.rng.laplace.LaplaceNoise`
  is the one noise object: it calibrates its scale from the sensitivity, ε and the vector size by
  OpenDP's privacy map, samples and gives its variance; the centroids, the category histograms,
  DiffGen's leaf counts and the UDFs all take their scale from it.
  :class:`~fragrelease.rng.laplace.SecureLaplace` samples through OpenDP's ``make_laplace``, which
  draws from the operating system's CSPRNG with exact arithmetic and releases values on a grid, so
  the output resists the floating-point attack on naive samplers (Mironov, CCS 2012).
- :mod:`fragrelease.rng.diffgen`: DiffGen's draws (Gumbel-max exponential mechanism, uniform
  points, Laplace and Gaussian noise) behind :class:`~fragrelease.rng.diffgen.DiffGenRandomness`.
- :mod:`fragrelease.rng.secure`: random keys, bytes and permutations from :mod:`secrets` (the OS
  CSPRNG): shuffling a release's rows, assigning records to owners in the demo split, key material.
- :mod:`fragrelease.rng.selection`: exact report-noisy-max through OpenDP (``DiffGenRandomness.noisy_max``; no
  release kind selects with it since 0.19.0, when the synthetic kind's structure became post-processing).
- :mod:`fragrelease.rng.polya`: exact divisible discrete-Laplace noise shares for secure aggregation:
  each owner adds ``X − Y`` with X, Y Pólya ``NB(1/k, α)``, so any k owners' shares sum to ``DLap(α)``
  (:class:`~fragrelease.rng.polya.DivisibleDiscreteLaplace`), by exact inversion against a lazily
  refined uniform from :class:`~fragrelease.rng.polya.SecureShareSource` (the OS CSPRNG).
- :mod:`fragrelease.rng.simulation`: the accuracy preview's simulated Laplace draws (OS CSPRNG by
  inversion; never released) and :class:`~fragrelease.rng.simulation.SeededSimulation` for tests.

Where the draws are called from (docs/architecture.md, "Randomness"; tests/test_architecture.py): no
other module touches a source of entropy; every draw that runs on Spark's executors is written in
``udfs/``; the Spark jobs draw on the driver only at the sites the test lists.

There are no seeds here, except in the sources named for tests. Tests that need reproducible noise
pass their own :class:`~fragrelease.rng.laplace.NoiseSource` (see ``tests/helpers/noise_injection.py``)
or :class:`~fragrelease.rng.diffgen.SeededDiffGenRandomness` or
:class:`~fragrelease.rng.polya.SeededShareSource`; the CLI and the jobs never accept one
from a user.
"""
