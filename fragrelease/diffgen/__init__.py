"""DiffGen and two-party DistDiffGen, Spark-free (docs/specification.md §7).

Sources: Mohammed et al., "Differentially private data release for data mining" (KDD 2011);
Mohammed et al., "Secure two-party differentially private data release for vertically partitioned
data" (TDSC 2014). The Spark jobs and the party processes are in ``fragrelease.jobs.diffgen``; the
Adult predictors (declared domains and taxonomies) in ``fragrelease.schemas.taxonomies``.

- :mod:`~fragrelease.diffgen.engine`: predictors (:class:`SpecializationTaxonomy`, numeric domains),
  scores, the exponential-mechanism specialization, the noisy leaf counts and synthetic cells;
- :mod:`~fragrelease.diffgen.two_party`: the two-party protocol (messages over a channel, Paillier
  comparisons and secure scalar products, the noisy shares) and its guarantees.
"""
