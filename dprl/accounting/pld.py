"""dp-accounting's privacy-loss-distribution (PLD) accountant for the Poisson-subsampled
Gaussian mechanism: the tightest sound accountant the book uses (Koskela et al. 2020;
Doroshenko et al. 2022, as implemented in dp-accounting)."""

from __future__ import annotations

from dp_accounting import GaussianDpEvent, PoissonSampledDpEvent, SelfComposedDpEvent
from dp_accounting.pld import pld_privacy_accountant

from dprl.validation import require_delta, require_int, require_positive, require_probability


def poisson_gaussian_epsilon(noise_multiplier: float, sampling_rate: float, steps: int,
                             delta: float) -> float:
    """eps at ``delta`` of ``steps`` Poisson-subsampled Gaussian steps (DP-SGD, Abadi et al.
    2016), by dp-accounting's PLD accountant (add-or-remove-one neighbours). Alg. 4 of Sharma
    et al. (2025) is this with ``sampling_rate = b / m`` over experts."""
    event = PoissonSampledDpEvent(require_probability("sampling_rate", sampling_rate,
                                                      open_low=True),
                                  GaussianDpEvent(require_positive("noise_multiplier",
                                                                   noise_multiplier)))
    accountant = pld_privacy_accountant.PLDAccountant()
    accountant.compose(SelfComposedDpEvent(event, require_int("steps", steps)))
    return float(accountant.get_epsilon(require_delta(delta)))
