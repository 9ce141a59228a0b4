"""Cost of the two-party DistDiffGen protocol: runtime per phase, messages and bytes (docs/specification.md §7).

    .venv/bin/python benchmarks/bench_distdiffgen.py --rows 2000 --key-bits 2048 --h 10 --epsilon 1

Runs the hospital and the insurer as two OS processes over a local socket on the first ``--rows``
cleaned Adult rows (default split of docs/diffgen.md) and prints each party's figures.
"""
from __future__ import annotations

import argparse
import time

from fragrelease.diffgen.params import ProtocolParams
from fragrelease.diffgen.share_noise import DEFAULT_NOISE, NOISE_MODES
from fragrelease.jobs.cli.diffgen import DEFAULT_HOSPITAL, DEFAULT_INSURER
from fragrelease.jobs.diffgen.processes import run_adult_two_party


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--key-bits", type=int, default=2048)
    ap.add_argument("--h", type=int, default=10)
    ap.add_argument("--epsilon", default="1")
    ap.add_argument("--score", default="max")
    ap.add_argument("--noise", choices=NOISE_MODES, default=DEFAULT_NOISE,
                    help="share noise (gaussian-squares is opt-in and not DP against the other party)")
    a = ap.parse_args()
    t0 = time.perf_counter()
    protocol = ProtocolParams(epsilon=a.epsilon, specializations=a.h, score=a.score, key_bits=a.key_bits,
                              allow_small_key=a.key_bits < 2048, noise=a.noise)
    r_h, r_i = run_adult_two_party(DEFAULT_HOSPITAL.split(","), DEFAULT_INSURER.split(","), protocol, rows=(0, a.rows))
    wall = time.perf_counter() - t0
    cells = r_h.noisy_counts.size
    print(f"rows {a.rows}, key {a.key_bits} bits, h {a.h}, ε {a.epsilon}, noise {r_h.noise}: wall {wall:.1f} s, "
          f"{cells} leaf x class cells")
    for r in (r_h, r_i):
        secs = ", ".join(f"{k} {v:.2f} s" for k, v in r.seconds.items())
        print(f"  {r.party}: sent {r.channel['sent_messages']} messages, {r.channel['sent_bytes']:,} bytes; {secs}")
    total_bytes = r_h.channel["sent_bytes"] + r_i.channel["sent_bytes"]
    total_msgs = r_h.channel["sent_messages"] + r_i.channel["sent_messages"]
    print(f"  total: {total_msgs} messages, {total_bytes:,} bytes")


if __name__ == "__main__":
    main()
