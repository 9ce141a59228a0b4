"""The marginal-synthesis release kind, Spark-free (``linkage: synthetic``; docs/specification.md §10).

A whole-table ε-DP release over horizontal fragments that keeps attribute dependence (numpy, and
``mbi`` for the aggregator's model): :mod:`~fragrelease.synthesis.kind` is the kind's Spark-free half the
registry (:mod:`fragrelease.kinds`) names (its configuration checks, guarantee, provenance terms, checks
before Spark and what the command line shows of it); :mod:`~fragrelease.synthesis.domain` codes the
attributes on public bins; :mod:`~fragrelease.synthesis.mechanism` holds the budget, the owners' count-plus-share
measurements and the structure chosen from the decoded sums; :mod:`~fragrelease.synthesis.model` the
aggregator's model and sampler; :mod:`~fragrelease.synthesis.protocol` the kind's spec, its three
rounds' messages (masked: :mod:`fragrelease.secagg`), their checks and the decoding; :mod:`~fragrelease.synthesis.preview` the plan's preview of what each
measurement costs; :mod:`~fragrelease.synthesis.describe_text` what a synthetic table says about itself.
The Spark half is :mod:`fragrelease.jobs.synthesis`; the protocol reaches this package only through the
registry, and this package imports nothing of the IR kinds.
"""
