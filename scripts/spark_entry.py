"""The application file spark-submit runs: hands its arguments to the ``fragrelease`` CLI.

The package itself arrives on the cluster through ``--py-files`` (the wheel built by
``spark-submit.sh``) or is installed on the nodes.
"""
import sys

from fragrelease.jobs.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
