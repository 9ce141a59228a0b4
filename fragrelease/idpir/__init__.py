"""iDP-IR releases over fragmented data, Spark-free (docs/specification.md §1-§4).

Source: Del Vasto-Terrientes et al. (ICISSP 2025), individual-ranking microaggregation with
individual differential privacy. The Spark jobs that apply these modules are in
``fragrelease.jobs.idpir``.

- :mod:`~fragrelease.idpir.microaggregation`: IR clusters and centroids of one attribute;
- :mod:`~fragrelease.idpir.sensitivity`: Δ of the centroid vector (DP-IR, iDP-IR, iDP) and the k each uses;
- :mod:`~fragrelease.idpir.mechanisms`: the noisy centroids (Laplace scale, clamping, rounding);
- :mod:`~fragrelease.idpir.category_order`: the rank order of categories (declared or DP frequency);
- :mod:`~fragrelease.protocol.messages`: the owners' metadata, the plan and the manifests, and their checks;
- :mod:`~fragrelease.protocol.config`: release configuration files validated into typed objects;
- :mod:`~fragrelease.idpir.metrics`: information loss (MeanSSE);
- :mod:`~fragrelease.idpir.preview`: the accuracy preview per attribute from public quantities (``fragrelease plan``);
- :mod:`~fragrelease.idpir.preview_error`: the released error after post-processing, by simulation (the preview's);
- :mod:`~fragrelease.idpir.guarantee`: the exact privacy statement of a release.
"""
