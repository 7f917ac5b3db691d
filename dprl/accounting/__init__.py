"""Privacy accounting: Renyi-DP curves, composition, conversion to (eps, delta), calibration.

Neighbouring relations: the Gaussian and Poisson-subsampled Gaussian curves, and the
moments accountant, assume add/remove-one neighbours; the sampled-without-replacement
bound (Wang, Balle & Kasiviswanathan 2019) assumes replace-one neighbours. Noise
multipliers are noise standard deviations over the L2 sensitivity for that relation.
"""

from dprl.accounting.calibration import (calibrate_noise_multiplier,
                                         calibrate_subsampled_gaussian,
                                         smallest_sufficient_scale)
from dprl.accounting.composition import advanced_composition, compose_rdp, self_compose_rdp
from dprl.accounting.conversion import rdp_to_delta, rdp_to_dp
from dprl.accounting.epsilon import (poisson_subsampled_gaussian_epsilon,
                                     sampled_without_replacement_gaussian_epsilon)
from dprl.accounting.moments import (DEFAULT_MAX_LAMBDA, moments_accountant_epsilon,
                                     moments_accountant_log_moment)
from dprl.accounting.orders import DEFAULT_INTEGER_ORDERS, DEFAULT_ORDERS
from dprl.accounting.rdp import (gaussian_rdp, poisson_subsampled_gaussian_rdp,
                                 poisson_subsampled_gaussian_rdp_quadrature)
from dprl.accounting.without_replacement import (
    FORWARD_DIFFERENCE_ORDERS, sampled_without_replacement_gaussian_rdp,
    sampled_without_replacement_gaussian_rdp_approx, sampled_without_replacement_gaussian_rdp_tight)

__all__ = [
    "DEFAULT_INTEGER_ORDERS",
    "DEFAULT_MAX_LAMBDA",
    "DEFAULT_ORDERS",
    "FORWARD_DIFFERENCE_ORDERS",
    "advanced_composition",
    "calibrate_noise_multiplier",
    "calibrate_subsampled_gaussian",
    "compose_rdp",
    "gaussian_rdp",
    "moments_accountant_epsilon",
    "moments_accountant_log_moment",
    "poisson_subsampled_gaussian_epsilon",
    "poisson_subsampled_gaussian_rdp",
    "poisson_subsampled_gaussian_rdp_quadrature",
    "rdp_to_delta",
    "rdp_to_dp",
    "sampled_without_replacement_gaussian_epsilon",
    "sampled_without_replacement_gaussian_rdp",
    "sampled_without_replacement_gaussian_rdp_approx",
    "sampled_without_replacement_gaussian_rdp_tight",
    "self_compose_rdp",
    "smallest_sufficient_scale",
]
