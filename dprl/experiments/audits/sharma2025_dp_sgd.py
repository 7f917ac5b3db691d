"""The DP-SGD audits' config and the privacy loss a white-box auditor reads from one noisy step
(:mod:`dprl.experiments.audits.sharma2025`, whose docstring describes the audit): torch-free,
shared by the registration there and the trainings of
:mod:`dprl.experiments.audits.sharma2025_training`."""

from __future__ import annotations

import dataclasses
from functools import lru_cache

import numpy as np

from dprl.experiments.audits.common import AuditConfig
from dprl.sharma2025.accounting import ACCOUNTANTS, noise_for_budget
from dprl.validation import require_choice, require_int, require_positive, require_probability


@dataclasses.dataclass(frozen=True, kw_only=True)
class DPSGDAuditConfig(AuditConfig):
    """``n_steps`` steps of (selective) DP-SGD, each a DP step with probability ``p`` (Alg. 3;
    1: Alg. 4), on ``n_experts`` experts with expected batch ``expected_batch`` (b), clip ``clip``,
    plain SGD at ``learning_rate``; canaries of reward ``reward`` (module docstring). The noise
    is calibrated to ``(eps, delta)`` at the paper's rate ``p b/m`` over all steps by
    ``accountant`` (``"pld"``, Sec. 6's; ``"rdp"`` at smoke scale), times ``noise_factor``
    (1; below 1: under-noised, for the tests)."""

    expected_batch: int = 256
    n_experts: int = 3000
    n_steps: int
    p: float = 1.0
    clip: float = 1.0
    learning_rate: float = 1.0
    reward: float = 100.0
    accountant: str = "pld"
    noise_factor: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        require_int("n_steps", self.n_steps)
        require_int("n_experts", self.n_experts, minimum=self.expected_batch)
        if self.runs_per_trial > self.n_experts:
            raise ValueError(f"runs_per_trial must be <= n_experts = {self.n_experts} (one "
                             f"canary expert per run), got {self.runs_per_trial}")
        require_probability("p", self.p, open_low=True)
        for name in ("clip", "learning_rate", "reward", "noise_factor"):
            require_positive(name, getattr(self, name))
        require_choice("accountant", self.accountant, ACCOUNTANTS)

    @property
    def sampling_rate(self) -> float:
        """Alg. 4's ``q = b / m``."""
        return self.expected_batch / self.n_experts

    @property
    def noise_multiplier(self) -> float:
        """Sec. 6's calibration: :func:`~dprl.sharma2025.accounting.noise_for_budget` of
        ``n_steps`` steps at rate ``p b/m``, times ``noise_factor``."""
        return self.noise_factor * _noise_for_budget(
            self.eps, self.delta, self.p * self.sampling_rate, self.n_steps, self.accountant)


_noise_for_budget = lru_cache(maxsize=16)(noise_for_budget)


def dp_step_log_likelihood_ratio(x: np.ndarray, noise_multiplier: float,
                                 q: float) -> np.ndarray:
    """Per DP step, ``log((1 - q) phi_s(x) + q phi_s(x - 1)) - log phi_s(x)`` ``= log(1 + q
    (e^{(2x - 1) / (2 s^2)} - 1))``: the privacy loss of the canary's presence (Poisson rate
    ``q``, clipped gradient 1) seen in a noisy gradient's projection ``x``."""
    return np.log1p(q * np.expm1((2 * x - 1) / (2 * noise_multiplier**2)))
