"""eps of T steps of a subsampled Gaussian, by RDP composition and conversion."""

from __future__ import annotations

from numpy.typing import ArrayLike

from dprl.accounting.composition import self_compose_rdp
from dprl.accounting.conversion import rdp_to_dp
from dprl.accounting.orders import DEFAULT_INTEGER_ORDERS, DEFAULT_ORDERS
from dprl.accounting.rdp import poisson_subsampled_gaussian_rdp
from dprl.accounting.without_replacement import sampled_without_replacement_gaussian_rdp


def poisson_subsampled_gaussian_epsilon(noise_multiplier: float, sampling_rate: float,
                                        steps: int, delta: float,
                                        orders: ArrayLike = DEFAULT_ORDERS,
                                        method: str = "improved") -> float:
    """eps at ``delta`` of ``steps`` Poisson-subsampled Gaussian steps: the curve of Mironov,
    Talwar & Zhang (2019, Sec. 3.3) composed (Mironov 2017, Prop. 1) and converted by
    :func:`~dprl.accounting.rdp_to_dp` (``method`` as there). Add/remove-one neighbours;
    ``sampling_rate=1`` gives the plain Gaussian mechanism."""
    rdp = poisson_subsampled_gaussian_rdp(orders, noise_multiplier, sampling_rate)
    return rdp_to_dp(orders, self_compose_rdp(rdp, steps), delta, method)[0]


def sampled_without_replacement_gaussian_epsilon(noise_multiplier: float, sample_size: int,
                                                 dataset_size: int, steps: int, delta: float,
                                                 orders: ArrayLike = DEFAULT_INTEGER_ORDERS,
                                                 method: str = "improved") -> float:
    """eps at ``delta`` of ``steps`` Gaussian steps on samples of ``sample_size`` drawn
    without replacement from ``dataset_size`` records: Wang, Balle & Kasiviswanathan
    (2019, Thm. 9) composed (Mironov 2017, Prop. 1) and converted by
    :func:`~dprl.accounting.rdp_to_dp`. Replace-one neighbours; integer orders."""
    rdp = sampled_without_replacement_gaussian_rdp(orders, noise_multiplier, sample_size,
                                                   dataset_size)
    return rdp_to_dp(orders, self_compose_rdp(rdp, steps), delta, method)[0]
