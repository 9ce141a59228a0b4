"""The marginal-synthesis release kind, Spark-free (``linkage: synthetic``; docs/specification.md §10).

A whole-table ε-DP release over horizontal fragments that keeps attribute dependence (numpy, and
``mbi`` for the aggregator's model): :mod:`~fragrelease.synthesis.domain` codes the attributes on public
bins; :mod:`~fragrelease.synthesis.mechanism` holds the owners' measurements, the aggregator's tree, model
and sampler; :mod:`~fragrelease.synthesis.protocol` the kind's spec, its two rounds' messages and their
checks; :mod:`~fragrelease.synthesis.preview` the plan's preview of what each measurement costs. The Spark
half is :mod:`fragrelease.jobs.synthesis`; the protocol reaches this package only through the registry
(:mod:`fragrelease.kinds`), and this package imports nothing of the IR kinds.
"""
