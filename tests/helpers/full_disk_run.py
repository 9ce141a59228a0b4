"""Run by tests/jobs/test_output_recovery.py in its own interpreter (so that the JVM's standard error is
the test's to read): ``fragrelease run CONFIG`` whose disk ``argv[2]`` fills up once the owners have spent,
just before the aggregator's commit. Exits with the command line's status."""
import os
import sys


def main(conf: str, disk: str) -> int:
    from fragrelease.jobs.cli import run_cli
    from fragrelease.jobs.protocol import aggregator

    real = aggregator.release

    def release_on_a_full_disk(spark, cfg, **kwargs):
        st = os.statvfs(disk)
        with open(os.path.join(disk, "filler"), "wb") as f:
            f.write(b"\0" * (st.f_bavail * st.f_frsize))
        return real(spark, cfg, **kwargs)

    aggregator.release = release_on_a_full_disk
    return run_cli(["run", conf])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
