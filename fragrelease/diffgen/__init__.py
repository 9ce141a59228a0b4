"""DiffGen and two-party DistDiffGen, Spark-free (docs/specification.md §7).

Sources: Mohammed et al., "Differentially private data release for data mining" (KDD 2011);
Mohammed et al., "Secure two-party differentially private data release for vertically partitioned
data" (TDSC 2014). The Spark jobs and the party processes are in ``fragrelease.jobs.diffgen``; the
Adult predictors (declared domains and taxonomies) in ``fragrelease.schemas.taxonomies``.

- :mod:`~fragrelease.diffgen.predictors`: predictors (taxonomy trees, numeric domains), their value ×
  class counts and the two scores;
- :mod:`~fragrelease.diffgen.engine`: the exponential-mechanism specialization (split points, the
  cut, the candidates, the ε ledger) and the :class:`~fragrelease.diffgen.engine.SplitChooser` seam;
- :mod:`~fragrelease.diffgen.release`: the noisy leaf counts, the sparse-domain filter and synthetic cells;
- :mod:`~fragrelease.diffgen.two_party`: the two-party protocol (messages over a channel, one
  function per phase); :mod:`~fragrelease.diffgen.paillier_ops` its Paillier comparisons and secure
  scalar products; :mod:`~fragrelease.diffgen.share_noise` the noisy shares' modes and guarantees.
"""
