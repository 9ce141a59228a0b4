"""The IR release kinds, Spark-free (``linkage: linked`` and ``unlinked``; docs/specification.md §1-§4).

Source: Del Vasto-Terrientes et al. (ICISSP 2025), individual-ranking microaggregation with
individual differential privacy. The kinds' Spark half is :mod:`fragrelease.jobs.idpir`; the protocol
they share with every kind (configuration, fragmentations, plan, manifests) is :mod:`fragrelease.protocol`,
which reaches this package only through the registry (:mod:`fragrelease.kinds`).

- :mod:`~fragrelease.idpir.kind`: the kinds' Spark-free half the registry names (configuration checks,
  guarantee, provenance terms, checks before Spark, what the command line shows), with
  :mod:`~fragrelease.idpir.linkage` (what a linked or unlinked release's rows are) and
  :mod:`~fragrelease.idpir.describe_text` (what an IR table says about itself);
- :mod:`~fragrelease.idpir.microaggregation`: IR clusters and centroids of one attribute;
- :mod:`~fragrelease.idpir.sensitivity`: Δ of the centroid vector (DP-IR, iDP-IR, iDP) and the k each uses;
- :mod:`~fragrelease.idpir.mechanisms`: the noisy centroids (Laplace scale, clamping, rounding);
- :mod:`~fragrelease.idpir.postprocess`: the consistency post-processing of a noisy centroid vector;
- :mod:`~fragrelease.idpir.category_order`: the rank order of categories (declared or DP frequency);
- :mod:`~fragrelease.idpir.spec`, :mod:`~fragrelease.idpir.stage`: an owner's protection spec and its
  stage as the executors see it;
- :mod:`~fragrelease.idpir.metrics`: information loss (MeanSSE);
- :mod:`~fragrelease.idpir.preview`: the accuracy preview per attribute from public quantities (``fragrelease plan``),
  with its objects (:mod:`~fragrelease.idpir.preview_types`), figures (:mod:`~fragrelease.idpir.preview_figures`),
  suggestions (:mod:`~fragrelease.idpir.preview_suggest`), simulation (:mod:`~fragrelease.idpir.preview_error`)
  and table (:mod:`~fragrelease.idpir.preview_table`);
- :mod:`~fragrelease.idpir.guarantee`: the exact privacy statement of a release.
"""
