"""Packaging for fragrelease.

The repository keeps the design card's top-level folders (``jobs/``, ``udfs/``, ``schemas/``) but
installs them under one namespace, ``fragrelease.jobs``, ``fragrelease.udfs``,
``fragrelease.schemas`` and ``fragrelease.experiments``, so that a wheel on a shared cluster does not
claim generic top-level names. The Spark-free privacy math lives in ``fragrelease/`` itself.
"""
import re
import warnings
from pathlib import Path

from setuptools import find_packages, setup

# An editable install (scripts/setup.sh: pip install -e) of a package_dir mapping uses setuptools'
# meta-path finder, which always warns "Editable installation. Please be careful with folders in your
# working directory with the same name as your package". Here the one such folder, fragrelease/, is
# the very source the finder maps, so an import from the working directory gets the same files; the
# mapped folders (jobs/, udfs/, ...) are not named fragrelease.*. The warning says nothing about this
# project, so a fresh install stays quiet. Every other packaging warning is left on.
warnings.filterwarnings("ignore", message=r"Editable installation\.")

# one version source: fragrelease/version.py
VERSION = re.search(r'^__version__ = "([^"]+)"', Path(__file__).with_name("fragrelease").joinpath("version.py")
                    .read_text(encoding="utf-8"), re.M).group(1)

setup(
    name="fragrelease",
    version=VERSION,
    description="Individual-DP releases over horizontally and vertically fragmented data on Apache Spark",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    # the repository folders jobs/, udfs/, schemas/, experiments/ and data/ install under fragrelease.*
    packages=["fragrelease", *(f"fragrelease.{p}" for p in find_packages("fragrelease")),
              "fragrelease.jobs", *(f"fragrelease.jobs.{p}" for p in find_packages("jobs")),
              "fragrelease.udfs", "fragrelease.schemas", "fragrelease.experiments", "fragrelease.data"],
    package_dir={
        "fragrelease": "fragrelease",
        "fragrelease.jobs": "jobs",
        "fragrelease.udfs": "udfs",
        "fragrelease.schemas": "schemas",
        "fragrelease.experiments": "experiments",
        "fragrelease.data": "data",
    },
    package_data={
        "fragrelease.data": ["adult/*", "adult/hierarchies/*", "wine/*", "german/*", "*.md", "*.sha256"],
        "fragrelease.schemas": ["*.yaml"],
        # the embedded session's JVM logging (jobs/session.py); the reports' Jinja2 templates (jobs/protocol/report.py)
        "fragrelease.jobs": ["log4j2.properties", "protocol/templates/*.j2"],
    },
    # Pure-Python dependencies only: pyspark and delta-spark are NOT here, so installing the wheel on a
    # Spark runtime (Databricks, a cluster's own Spark) leaves the runtime's pyspark and Delta alone.
    # Supported Spark: 4.0 to 4.2 (README, "Supported Spark versions"); fragrelease.jobs checks it at
    # the first Spark use and names this extra when pyspark is missing.
    install_requires=[
        "deltalake>=1.6,<2",
        "pandas>=2.2,<3",
        "numpy>=1.26",
        "pyarrow>=15",
        "pydantic>=2.6,<3",
        "PyYAML>=6",
        # typer >= 0.26 carries its own copy of click and no longer depends on click: nothing here
        # imports click (fragrelease.jobs.cli finds the usage errors' base through typer.BadParameter)
        "typer>=0.12",
        "rich>=13",
        "opendp>=0.16,<0.17",  # the Laplace noise (fragrelease.rng.laplace)
        "matplotlib>=3.8",  # the owners' and the aggregator's private reports (reports: true, the default)
        "Jinja2>=3.1,<4",  # the reports' HTML templates (jobs/protocol/templates, autoescape on)
        "scipy>=1.12",  # scipy.optimize.isotonic_regression (the default post-processing)
        "cryptography>=42",  # Ed25519 manifest signatures (fragrelease.signing), HMAC-SHA-256 pseudonyms (fragrelease.pseudonyms)
    ],
    extras_require={
        # the embedded local Spark stack (laptops, CI, spark-submit from this machine): scripts/setup.sh
        # installs it. delta-spark 4.4.x supports pyspark <= 4.2.0; Maven Central has the matching jar
        # (io.delta:delta-spark_4.2_2.13) at 4.4.0 only, and the Python package must match the jar.
        "local": ["pyspark[sql,connect]==4.2.0", "delta-spark==4.4.0"],
        # DistDiffGen's two-party protocol (fragrelease diffgen two-party): Paillier encryption; not
        # needed by iDP-IR releases (fragrelease.diffgen.paillier_ops names this extra when phe is missing)
        "diffgen": ["phe>=1.5,<2", "gmpy2>=2.1"],  # gmpy2 speeds up phe about 8x
        "test": ["pytest>=8", "pytest-xdist>=3.8,<4", "chispa>=0.10", "scipy>=1.12", "hypothesis>=6", "pycanon>=1.3,<2",
                 # the README's reading examples (tests/jobs/test_lakehouse.py): pl.read_delta
                 "polars>=1.20,<3",
                 # linters pinned so CI does not change verdict with a new release
                 "ruff==0.17.6", "mypy==2.4.1", "pandas-stubs==2.3.3.260113", "types-PyYAML==6.0.12.20261113",
                 # executing notebooks/walkthrough.ipynb in CI (tests/test_notebook.py)
                 "nbclient>=0.10,<1", "nbformat>=5.9,<6", "ipykernel>=6.29,<8",
                 # the DistDiffGen tests (the diffgen extra)
                 "phe>=1.5,<2", "gmpy2>=2.1",
                 # loading databricks.yml's jobs into Databricks' typed model (tests/jobs/test_databricks_bundle.py)
                 "databricks-bundles==1.22.*"],
        # paper reproductions (fragrelease.experiments): DiffGen's classifier accuracy; the downstream
        # comparison with OpenDP's MST/AIM synthetic data (opendp[mbi]: Private-PGM, JAX; pins polars 1.36.1,
        # the version OpenDP's Polars plugin is built against)
        # OpenDP 0.16 pins mbi 1.1.0, whose default sampler is comonotone: fragrelease.experiments.downstream
        # samples with method="sample". dpmm (a second MST) is NOT an extra: dpmm 0.1.9 pins opendp==0.12.1
        # and fragrelease needs opendp 0.16, so pip cannot resolve both in one environment; it runs in its
        # own venv (experiments/dpmm-requirements.txt; docs/evaluation.md, "Downstream utility").
        # the marginal-synthesis mechanism's model (fragrelease.synthesis, docs/specification.md §10):
        # Private-PGM (mbi) as OpenDP 0.16 pins it; its sampler is not used (fragrelease samples itself)
        "synthesis": ["opendp[mbi]>=0.16,<0.17"],
        "experiments": ["scikit-learn>=1.4", "opendp[mbi]>=0.16,<0.17", "polars>=1.20,<3"],
        # measured disclosure risk (fragrelease.risk: the owners' risk_check and the risk experiment):
        # anonymeter 1.1.0's own dependencies. anonymeter itself declares numpy<1.27, which OpenDP's
        # MBI extra (JAX: numpy>=2) cannot share an environment with; its code runs on numpy 2, so it is
        # installed apart with --no-deps (scripts/setup.sh; fragrelease.risk.MISSING_ANONYMETER)
        "risk": ["numba>=0.59", "joblib>=1.2", "scikit-learn>=1.2", "polars>=1.8"],
    },
    entry_points={
        "console_scripts": [
            "fragrelease=fragrelease.jobs.cli:main",
            # one entry point per party step, for Databricks python_wheel_task with named parameters
            "fragrelease-owner-metadata=fragrelease.jobs.cli:metadata_main",
            "fragrelease-owner-protect=fragrelease.jobs.cli:protect_main",
            "fragrelease-aggregator-plan=fragrelease.jobs.cli:plan_main",
            "fragrelease-aggregator-release=fragrelease.jobs.cli:release_main",
        ],
    },
)
