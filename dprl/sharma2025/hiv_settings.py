"""The HIV settings of Sharma et al. (2025, App. B.1) and their model: drug-1 penalty in 50
values x drug-2 penalty in 20 values x efficacy noise in {none, Gaussian s.d. 0.01}
(:data:`dprl.sharma2025.variants.GRIDS`), the efficacies perturbed per patient and step
(:func:`noisy_efficacies`), the penalised rewards (:func:`penalised_rewards`), and patients
simulated in one integration per step (:func:`_simulate`); the experts trained on them are
in :mod:`dprl.sharma2025.hiv_experts`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from dprl.envs.hiv import HIVTreatmentMDP
from dprl.envs.hiv_model import integrate
from dprl.sharma2025.variants import variant_grid
from dprl.validation import frozen_copy, require_array


@dataclass(frozen=True)
class HIVSettings:
    """Settings of App. B.1's HIV grid: ``ids`` ``(S,)`` their indices in
    :func:`dprl.sharma2025.variants.variant_grid` ``("HIV")`` (which name their random
    streams), ``drug_penalties`` ``(S, 2)`` the ``(p1, p2)`` of the reward and
    ``efficacy_noise`` ``(S,)`` the s.d. of the efficacy noise."""

    ids: np.ndarray
    drug_penalties: np.ndarray
    efficacy_noise: np.ndarray

    def __post_init__(self) -> None:
        ids = np.asarray(self.ids)
        if not np.issubdtype(ids.dtype, np.integer) or ids.ndim != 1 or ids.size == 0 \
                or ids.min() < 0:
            raise ValueError(f"ids must be a non-empty 1-D array of integers >= 0, got "
                             f"{ids.dtype} {ids.shape}")
        penalties = require_array("drug_penalties", self.drug_penalties, shape=(ids.size, 2))
        noise = require_array("efficacy_noise", self.efficacy_noise, shape=(ids.size,))
        if penalties.min() < 0 or noise.min() < 0:
            raise ValueError("drug_penalties and efficacy_noise must be >= 0")
        for name, value in (("ids", ids.astype(np.int64)), ("drug_penalties", penalties),
                            ("efficacy_noise", noise)):
            object.__setattr__(self, name, frozen_copy(value))

    @property
    def n_settings(self) -> int:
        """``S``."""
        return self.ids.size

    def take(self, index: np.ndarray) -> HIVSettings:
        """The settings at positions ``index`` (repeats allowed)."""
        return HIVSettings(self.ids[index], self.drug_penalties[index],
                           self.efficacy_noise[index])


def hiv_settings(ids: Sequence[int] | np.ndarray | None = None) -> HIVSettings:
    """App. B.1's HIV settings (Sharma et al. 2025): all 2000 of
    ``variant_grid("HIV")``, or those at grid indices ``ids``."""
    grid = variant_grid("HIV")
    n = grid["efficacy_noise"].size
    ids = np.arange(n) if ids is None else np.asarray(ids)
    if not np.issubdtype(ids.dtype, np.integer) or ids.ndim != 1 or ids.size == 0 \
            or ids.min() < 0 or ids.max() >= n:
        raise ValueError(f"ids must be a non-empty 1-D array of integers in [0, {n}), got "
                         f"{ids.dtype} {ids.shape}")
    penalties = np.stack([grid["drug_1_penalty"], grid["drug_2_penalty"]], axis=1)
    return HIVSettings(ids, penalties[ids], grid["efficacy_noise"][ids])


def noisy_efficacies(efficacies: np.ndarray, noise_sd: np.ndarray,
                     normals: np.ndarray) -> np.ndarray:
    """The efficacies held in a step of App. B.1's noisy settings: ``clip(e + sigma z, 0, 1)``
    for efficacies ``(n, 2)``, per-patient s.d. ``noise_sd`` ``(n,)`` and standard normals
    ``normals`` ``(n, 2)`` (independent per patient, step and drug)."""
    efficacies = require_array("efficacies", efficacies, shape=(None, 2))
    noise_sd = require_array("noise_sd", noise_sd, shape=(efficacies.shape[0],))
    normals = require_array("normals", normals, shape=efficacies.shape)
    return np.clip(efficacies + noise_sd[:, None] * normals, 0.0, 1.0)


def penalised_rewards(mdp: HIVTreatmentMDP, next_states: np.ndarray, actions: np.ndarray,
                      drug_penalties: np.ndarray) -> np.ndarray:
    """Ernst et al. (2006)'s reward with per-patient drug penalties (App. B.1's settings):
    ``-0.1 V - p1 e1^2 - p2 e2^2 + 1e3 E`` at the post-step states ``(..., 6)``, with the
    nominal efficacies of ``actions`` ``(...)`` and ``drug_penalties`` ``(..., 2)``
    (broadcast); equal to :meth:`HIVTreatmentMDP.rewards` bit for bit when the penalties are
    the MDP's."""
    next_states = require_array("next_states", next_states)
    actions = np.asarray(actions)
    if next_states.shape[-1:] != (6,) or next_states.shape[:-1] != actions.shape:
        raise ValueError(f"next_states must have shape actions.shape + (6,) = "
                         f"{actions.shape + (6,)}, got {next_states.shape}")
    e1, e2 = np.moveaxis(mdp.efficacies(actions.ravel()).reshape(*actions.shape, 2), -1, 0)
    penalties = require_array("drug_penalties", drug_penalties)
    if penalties.shape[-1:] != (2,):
        raise ValueError(f"drug_penalties must have shape (..., 2), got {penalties.shape}")
    p1, p2 = penalties[..., 0], penalties[..., 1]
    return (-mdp.virus_weight * next_states[..., 4] - p1 * e1 ** 2 - p2 * e2 ** 2
            + mdp.effector_weight * next_states[..., 5])


def _simulate(mdp: HIVTreatmentMDP, choose: Callable[[int, np.ndarray], np.ndarray],
              n: int, noise: tuple[np.ndarray, np.ndarray] | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """``n`` patients from ``mdp``'s initial state for ``mdp.horizon`` steps, all in one
    integration per step; ``choose(t, observations (n, 6))`` gives the actions ``(n,)``;
    ``noise = (sd (n,), normals (n, H, 2))`` perturbs the efficacies
    (:func:`noisy_efficacies`). Returns the states ``(n, H + 1, 6)`` and actions ``(n, H)``."""
    states = mdp.initial_states(n)
    path, actions = [states], []
    for t in range(mdp.horizon):
        action = np.asarray(choose(t, np.log10(states)), dtype=np.int64)
        efficacies = mdp.efficacies(action)
        if noise is not None:
            efficacies = noisy_efficacies(efficacies, noise[0], noise[1][:, t])
        states = integrate(states, efficacies, mdp.step_days, mdp.constants, mdp.tol)
        path.append(states)
        actions.append(action)
    return np.stack(path, axis=1), np.stack(actions, axis=1)
