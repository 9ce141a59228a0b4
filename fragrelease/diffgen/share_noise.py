"""How DistDiffGen's parties perturb their count shares, and what each way guarantees.

Source: Mohammed et al., "Secure two-party differentially private data release for vertically
partitioned data" (TDSC 2014) Algorithm 1 line 22 (``gaussian-squares``) and docs/specification.md
§7; docs/diffgen.md explains both modes. :func:`share_noise_guarantee` is what a release's
provenance states; :func:`gaussian_squares_peer_delta` is the δ the paper's construction leaves
against the other party.
"""
from __future__ import annotations

import math
from fractions import Fraction

from fragrelease.errors import InvalidParameterError

#: How the parties perturb their count shares (:func:`fragrelease.diffgen.two_party.run_party`); the first is the default. ``gaussian-squares``
#: is the construction of Mohammed et al. (docs/specification.md §7), opt-in only: not DP against the other party.
NOISE_MODES = ("laplace-each", "gaussian-squares")
DEFAULT_NOISE = NOISE_MODES[0]


def gaussian_squares_peer_delta(epsilon) -> float:
    """δ of the other party's view of a leaf count under ``gaussian-squares`` at privacy loss ε/2.

    The other party knows its own Y_a² − Y_b², so it sees C + Z with Z = Y_c² − Y_d², Y ~ N(0, 1/ε).
    Z = (Y_c − Y_d)(Y_c + Y_d) is a product of two independent N(0, 2/ε) variables, whose density is
    ``f(z) = ε/(2π) · K0(ε|z|/2)`` (unbounded at 0, so no finite ε gives δ = 0). One record added or
    removed changes one count by 1, and the returned value is
    ``δ = ∫ max(0, f(z) − e^{ε/2} f(z − 1)) dz``, the smallest δ for which that view is
    (ε/2, δ)-DP (numerical quadrature; about 0.222 at ε = 1, 0.152 at ε = 1/2, 0.307 at ε = 2).

    Parameters
    ----------
    epsilon : the release's total ε (> 0, finite; int, float, Fraction or str).

    Raises
    ------
    InvalidParameterError
        ε not finite or ≤ 0.

    Source: Mohammed et al., "Secure Two-Party Differentially Private Data Release for Vertically
    Partitioned Data" (TDSC 2014), Algorithm 1 line 22; docs/specification.md §7.
    """
    from scipy import integrate, special

    eps = float(Fraction(epsilon))
    if not math.isfinite(eps) or eps <= 0:
        raise InvalidParameterError(f"epsilon must be finite and > 0, not {epsilon!r}")

    def f(z: float) -> float:
        return eps / (2 * math.pi) * float(special.k0(eps * abs(z) / 2)) if z != 0 else math.inf

    def excess(z: float) -> float:
        return max(0.0, f(z) - math.exp(eps / 2) * f(z - 1))

    # f has logarithmic singularities at 0 and 1: integrate piecewise between them
    pieces = ((-math.inf, -1.0), (-1.0, 0.0), (0.0, 1.0), (1.0, math.inf))
    return float(sum(integrate.quad(excess, a, b, limit=200)[0] for a, b in pieces))


#: What holds for DiffGen's selections as sampled (docs/specification.md §7, "Exponential mechanism sampler").
SELECTION_SAMPLER_CAVEAT = (
    "the selections are sampled by a floating-point Gumbel-max whose Gumbel variables lie in [-3.60, 36.74], so a "
    "candidate more than 40.34 log-weight units behind the best is never chosen: as sampled they are "
    "(epsilon, delta)-DP for a small delta we have not bounded, not pure epsilon-DP")


def share_noise_guarantee(noise: str, epsilon) -> dict:
    """What a two-party release guarantees against the public and against the other party (public facts only).

    Returns a JSON-ready dict: ``mode``, ``construction``, ``against_public``, ``against_other_party``,
    ``dp_against_other_party`` (bool), ``other_party_delta`` (the δ of
    :func:`gaussian_squares_peer_delta` for ``gaussian-squares``, else None) and ``assumptions``. It depends only on
    the mode and ε. Neighbours: add/remove one record. Both statements assume semi-honest parties and
    an ideal winner comparison (see docs/diffgen.md, "Known limitations").

    Raises
    ------
    InvalidParameterError
        ``noise`` not in :data:`NOISE_MODES`, or a bad ε.

    Source: docs/specification.md §7; docs/diffgen.md, "Noise on the count shares".
    """
    if noise not in NOISE_MODES:
        raise InvalidParameterError(f"noise must be one of {NOISE_MODES}, not {noise!r}")
    eps = Fraction(epsilon)
    if eps <= 0:
        raise InvalidParameterError(f"epsilon must be > 0, not {epsilon!r}")
    half = eps / 2
    assumptions = ("semi-honest parties; the winner comparison is not a formally secure comparison "
                   f"(docs/diffgen.md, Known limitations); {SELECTION_SAMPLER_CAVEAT}")
    public = (f"epsilon-DP (epsilon = {eps}): the selections spend at most epsilon/2 and the leaf counts "
              f"epsilon/2 = {half}")
    if noise == "laplace-each":
        return {"mode": noise,
                "construction": ("X_i = C_i + Lap(2/epsilon) from each party; "
                                 "released C + Lap(2/epsilon) + Lap(2/epsilon)"),
                "against_public": public + " (C + Lap(2/epsilon), plus the other party's independent noise)",
                "against_other_party": (f"epsilon-DP (epsilon = {eps}): a party that subtracts its own noise sees "
                                        f"C + Lap(2/epsilon), epsilon/2-DP = {half} for the leaf counts, plus the "
                                        "selections (epsilon/2)"),
                "dp_against_other_party": True, "other_party_delta": None, "assumptions": assumptions}
    delta = gaussian_squares_peer_delta(eps)
    return {"mode": noise,
            "construction": "X_i = C_i + Y_a^2 - Y_b^2, Y ~ N(0, 1/epsilon); released C + Lap(2/epsilon)",
            "against_public": public + " (X_1 + X_2 = C + Lap(2/epsilon))",
            "against_other_party": (f"NOT differentially private against the other party: it can subtract its own "
                                    f"Y_a^2 - Y_b^2 and sees C + Y_c^2 - Y_d^2 (not Laplace), which is only "
                                    f"(epsilon/2, {delta:.3f})-DP = ({half}, {delta:.3f}) for the leaf counts "
                                    f"(about (1/2, 0.22) at epsilon = 1)"),
            "dp_against_other_party": False, "other_party_delta": round(delta, 4), "assumptions": assumptions}
