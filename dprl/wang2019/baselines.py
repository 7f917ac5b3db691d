"""The baselines of Wang & Hegde (2019), Fig. 2, for the same (eps, delta) and the paper's
neighbouring relation: reward functions with ``||r - r'||_inf <= 1`` (Sec. 2.1), all on
the authors' DQN (:mod:`dprl.wang2019.q_learning`, noise level 0) and the line MDP.

- **Input perturbation** (Venkitasubramaniam 2013): every reward the learner observes is
  replaced by ``r_t + N(0, s^2)``. Each is a Gaussian mechanism of sensitivity
  ``|r(x) - r'(x)| <= 1``; states and actions depend on r only through earlier perturbed
  rewards (the transitions do not depend on r), so the whole run is post-processing of
  the T = n_episodes H releases, composed adaptively.
- **Output perturbation** (in the manner of Balle, Gomrokchi & Precup 2016) -- **NOT
  PRIVATE, utility only**, as in the paper ("not differentially private under our
  context"): the plain DQN is trained, and its Q values on the evaluation grid (G points x
  A actions) are released with i.i.d. ``N(0, s^2)`` noise, s the analytic Gaussian
  mechanism's for L2 sensitivity ``sqrt(G A) R``, ``R = sum_{t<H} gamma^t`` the largest
  change of an H-step discounted return-to-go under the relation (``1/(1 - gamma)`` when
  truncation bootstraps). It would be private if the released table were the exact
  return-to-go of a fixed policy; the learned network has no such sensitivity bound (its
  training, acting and argmax all see the raw rewards), and states off the grid are not
  covered at all -- the gap the paper names. The training episodes are the plain DQN's.
- **DP-SGD** (Abadi et al. 2016) on the Q-network (:mod:`dprl.wang2019.dp_sgd`): per-example
  gradients clipped to norm C, ``N(0, (z Delta)^2 I)`` added to the batch sum.
  *Sensitivity:* a neighbouring reward function may change every reward, hence every
  example of every batch; example i's clipped gradient may move anywhere in the ball of
  radius C (the Huber residual's sign can flip), so one step's sum moves by at most
  ``Delta = 2 B C`` -- B times the ``C`` (add/remove) or ``2 C`` (replace-one) of the usual
  one-record relation. *No amplification:* every step touches the changed "individual",
  whatever the replay sample, so the ``T - B + 1`` updates compose as plain Gaussian
  mechanisms. :func:`subsampled_dp_sgd_multiplier` gives, for comparison only, the
  multiplier a (wrong) Poisson-subsampled accountant with q = B / N and sensitivity C
  would give.

**Composition** (:func:`composed_gaussian_multiplier`): k adaptive Gaussian mechanisms of
noise multiplier z are exactly ``sqrt(k)/z``-GDP (Dong, Roth & Su 2022, Cor. 3.3), whose
(eps, delta) profile is that of one Gaussian mechanism of sensitivity ``sqrt(k)`` (Balle &
Wang 2018, Thm. 8): ``accountant="exact"`` (default), the tightest correct bound. RDP of
the Gaussian (Mironov 2017), composed and converted, is ``accountant="rdp"`` (~10% more
noise here). Advanced composition is far looser and is not offered.

**Randomness.** Run i's training streams are those of ``train`` (children 0-5 of its seed
sequence); child 6 is left to evaluation (:mod:`dprl.experiments.wang2019`); the privacy
noise comes from child 7, derived from a copy, so ``rngs[i]`` reaches ``train`` untouched
and a baseline with its noise off is the plain DQN bit for bit.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from dprl.accounting import (DEFAULT_ORDERS, calibrate_noise_multiplier,
                             calibrate_subsampled_gaussian, gaussian_rdp, rdp_to_dp,
                             self_compose_rdp)
from dprl.envs.line_mdp import LineMDP
from dprl.mechanisms import analytic_gaussian_sigma, gaussian_epsilon
from dprl.seeding import trial_generator
from dprl.validation import require_array, require_choice, require_int, require_positive
from dprl.wang2019.dp_sgd import ClippedNoisyMLPQ
from dprl.wang2019.q_functions import MLPQ, Learner
from dprl.wang2019.q_learning import QLearningConfig, TrainResult, train

ACCOUNTANTS = ("exact", "rdp")
METHODS = ("input", "output", "dp_sgd")
#: ``||r - r'||_inf`` for neighbouring reward functions (Wang & Hegde 2019, Sec. 2.1).
REWARD_SENSITIVITY = 1.0
#: The child of each run's seed sequence that feeds the privacy noise (module docstring).
_PRIVACY_CHILD = 7


# --- calibration ---------------------------------------------------------------------------

def composed_gaussian_epsilon(noise_multiplier: float, steps: int, delta: float, *,
                              accountant: str = "exact",
                              orders: ArrayLike = DEFAULT_ORDERS) -> float:
    """eps at ``delta`` of ``steps`` adaptive Gaussian mechanisms of L2 sensitivity 1 and
    noise std ``noise_multiplier``, no subsampling. ``"exact"``: the composition is
    ``sqrt(steps)/z``-GDP (Dong, Roth & Su 2022, Cor. 3.3), i.e. one Gaussian mechanism of
    sensitivity ``sqrt(steps)`` (Balle & Wang 2018, Thm. 8). ``"rdp"``: ``steps alpha /
    (2 z^2)`` (Mironov 2017, Props. 7 and 1) on ``orders``, converted as dp-accounting's
    ``RdpAccountant`` (:func:`~dprl.accounting.rdp_to_dp`, ``"improved"``)."""
    z = require_positive("noise_multiplier", noise_multiplier)
    steps = require_int("steps", steps)
    if _accountant(accountant) == "exact":
        return gaussian_epsilon(delta, math.sqrt(steps), z)
    return rdp_to_dp(orders, self_compose_rdp(gaussian_rdp(orders, z), steps), delta)[0]


def composed_gaussian_multiplier(steps: int, eps: float, delta: float, *,
                                 accountant: str = "exact",
                                 orders: ArrayLike = DEFAULT_ORDERS) -> float:
    """Smallest noise multiplier z (noise std over per-step L2 sensitivity) for which
    ``steps`` adaptive Gaussian mechanisms are (eps, delta)-DP by
    :func:`composed_gaussian_epsilon`: ``"exact"`` is the analytic Gaussian mechanism of
    sensitivity ``sqrt(steps)`` (Balle & Wang 2018; Dong, Roth & Su 2022), ``"rdp"`` inverts
    the RDP accountant (Mironov 2017) by bisection."""
    steps = require_int("steps", steps)
    if _accountant(accountant) == "exact":
        return analytic_gaussian_sigma(math.sqrt(steps), eps, delta)
    return calibrate_noise_multiplier(eps, delta, lambda z, d: composed_gaussian_epsilon(
        z, steps, d, accountant="rdp", orders=orders))


def n_rewards(config: QLearningConfig, mdp: LineMDP = LineMDP()) -> int:
    """T = n_episodes H, the rewards the DQN observes (Wang & Hegde 2019, Alg. 1's T)."""
    return _config(config).n_episodes * _mdp(mdp).horizon


def input_perturbation_scale(config: QLearningConfig, eps: float, delta: float,
                             mdp: LineMDP = LineMDP(), *, accountant: str = "exact") -> float:
    """Std of the Gaussian noise on each observed reward for (eps, delta)-DP input
    perturbation (Venkitasubramaniam 2013; Wang & Hegde 2019, Fig. 2): T releases of
    sensitivity ``REWARD_SENSITIVITY``, composed (:func:`composed_gaussian_multiplier`)."""
    return REWARD_SENSITIVITY * composed_gaussian_multiplier(
        n_rewards(config, mdp), eps, delta, accountant=accountant)


def return_bound(config: QLearningConfig, mdp: LineMDP = LineMDP()) -> float:
    """Largest change of a discounted return-to-go when ``||r - r'||_inf <= 1`` (Wang &
    Hegde 2019, Sec. 2.1): ``sum_{t<H} gamma^t`` for episodes truncated without bootstrap,
    ``1 / (1 - gamma)`` with bootstrap (the Bellman fixed point; Balle et al. 2016 use
    ``R_max / (1 - gamma)``)."""
    gamma, horizon = _config(config).gamma, _mdp(mdp).horizon
    if config.bootstrap_truncation and gamma == 1:
        raise ValueError("returns are unbounded with gamma = 1 and bootstrap_truncation")
    if config.bootstrap_truncation:
        discounted_steps = 1 / (1 - gamma)
    else:
        discounted_steps = horizon if gamma == 1 else (1 - gamma ** horizon) / (1 - gamma)
    return REWARD_SENSITIVITY * discounted_steps


def output_perturbation_scale(config: QLearningConfig, eps: float, delta: float,
                              n_values: int, mdp: LineMDP = LineMDP()) -> float:
    """NOT PRIVATE (utility only; see the module docstring): std of the i.i.d. noise on
    ``n_values`` released Q values in the manner of Balle et al. (2016) -- the analytic
    Gaussian mechanism (Balle & Wang 2018) for L2 sensitivity ``sqrt(n_values)`` times
    :func:`return_bound`."""
    n_values = require_int("n_values", n_values)
    return analytic_gaussian_sigma(math.sqrt(n_values) * return_bound(config, mdp), eps, delta)


def dp_sgd_updates(config: QLearningConfig, mdp: LineMDP = LineMDP()) -> int:
    """SGD steps of the authors' DQN, one per environment step once B transitions are
    stored: ``T - B + 1``, each a Gaussian mechanism of DP-SGD (Abadi et al. 2016); with
    ``schedule="iterations"`` (Wang & Hegde 2019, Alg. 1) one per B transitions, ``T // B``."""
    if _config(config).schedule == "iterations":
        return require_int("T // batch_size", n_rewards(config, mdp) // config.batch_size)
    updates = n_rewards(config, mdp) - config.batch_size + 1
    if updates < 1:
        raise ValueError(f"no SGD step: T = {n_rewards(config, mdp)} transitions < batch "
                         f"size {config.batch_size}")
    return updates


def dp_sgd_sensitivity(batch_size: int, clip_norm: float) -> float:
    """L2 sensitivity ``2 B C`` of one DP-SGD step's sum of B clipped gradients (Abadi et al.
    2016, Alg. 1) when neighbouring reward functions may change every example (Wang &
    Hegde 2019, Sec. 1): each clipped gradient moves within a ball of radius C."""
    return 2 * require_int("batch_size", batch_size) * require_positive("clip_norm", clip_norm)


def dp_sgd_noise_multiplier(config: QLearningConfig, eps: float, delta: float,
                            mdp: LineMDP = LineMDP(), *, accountant: str = "exact") -> float:
    """Noise multiplier z (std over :func:`dp_sgd_sensitivity`) for (eps, delta)-DP DP-SGD
    on the DQN without subsampling amplification: :func:`dp_sgd_updates` Gaussian
    mechanisms composed (:func:`composed_gaussian_multiplier`; Wang & Hegde 2019, Sec. 1)."""
    return composed_gaussian_multiplier(dp_sgd_updates(config, mdp), eps, delta,
                                        accountant=accountant)


def subsampled_dp_sgd_multiplier(config: QLearningConfig, eps: float, delta: float,
                                 mdp: LineMDP = LineMDP(),
                                 orders: ArrayLike = DEFAULT_ORDERS) -> float:
    """WRONG HERE, for comparison only: the multiplier (std over C) of the usual DP-SGD
    accountant (Abadi et al. 2016; Mironov, Talwar & Zhang 2019), which treats one
    transition as the individual (add/remove-one, sensitivity C) and each update as a
    Poisson sample at rate ``q = B / N``, N = min(T, replay capacity), over
    :func:`dp_sgd_updates` steps. Wang & Hegde (2019, Sec. 1): under reward neighbours
    this amplification "no longer holds"."""
    dataset = min(n_rewards(config, mdp), config.replay_capacity)
    return calibrate_subsampled_gaussian(eps, delta, config.batch_size / dataset,
                                         dp_sgd_updates(config, mdp), orders)


# --- results and training ------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class BaselineResult:
    """R runs of one baseline of Wang & Hegde (2019), Fig. 2, E episodes of H steps.

    ``method`` (one of :data:`METHODS`); ``noise_scales`` (R,): std of the privacy noise
    (per reward; per released value; on the batch sum of clipped gradients); ``returns``
    (R, E): true undiscounted return of every training episode (what Fig. 2 plots against
    ``H (e + 1)`` samples); ``grid`` (G,) and ``released_q`` (R, G, A): the released Q on
    the grid; ``training``: the underlying :class:`~dprl.wang2019.q_learning.TrainResult`
    (for input perturbation its ``returns`` sum the *perturbed* rewards);
    ``perturbations``: the noise added, (R, T) rewards or (R, G, A) values, ``None`` for
    DP-SGD (drawn inside each update)."""

    method: str
    noise_scales: np.ndarray
    returns: np.ndarray
    grid: np.ndarray
    released_q: np.ndarray
    training: TrainResult
    perturbations: np.ndarray | None


@dataclass(frozen=True, eq=False)
class _PerturbedRewardLine(LineMDP):
    """``base`` whose rewards arrive with the next column of ``noise`` added: the reward
    channel of input perturbation (Venkitasubramaniam 2013), one (R,) column per step."""

    base: LineMDP = field(kw_only=True)
    noise: Iterator[np.ndarray] = field(kw_only=True)

    def transition(self, states: ArrayLike, actions: ArrayLike,
                   uniforms: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """``base.transition`` with perturbed rewards (Venkitasubramaniam 2013)."""
        next_states, rewards = self.base.transition(states, actions, uniforms)
        return next_states, rewards + next(self.noise)


def train_perturbed_rewards(config: QLearningConfig, reward_stds: ArrayLike,
                            rngs: Sequence[np.random.Generator],
                            noise_rngs: Sequence[np.random.Generator], *,
                            learner: Learner = MLPQ(), mdp: LineMDP = LineMDP(),
                            grid: ArrayLike | None = None) -> BaselineResult:
    """Input perturbation (Venkitasubramaniam 2013) at given noise levels: the DQN of Wang &
    Hegde (2019, Alg. 1, sigma = 0) trained on ``r_t + reward_stds[i] z_t``, ``z`` (T,)
    drawn at once from ``noise_rngs[i]``; ``rngs`` as in ``train``."""
    rngs = _generators("rngs", rngs)
    noise_rngs = _one_per_run(noise_rngs, len(rngs))
    stds, steps = _scales("reward_stds", reward_stds, len(rngs)), n_rewards(config, mdp)
    noise = stds[:, None] * np.stack([rng.standard_normal(steps) for rng in noise_rngs])
    channel = _PerturbedRewardLine(mdp.horizon, mdp.max_move, base=mdp, noise=iter(noise.T))
    training = train(learner, config, np.zeros(len(rngs)), rngs, channel, grid)
    return BaselineResult("input", stds, _true_returns(training, mdp), training.grid,
                          training.network_q, training, noise)


def train_input_perturbation(config: QLearningConfig, eps: ArrayLike, delta: float,
                             rngs: Sequence[np.random.Generator], *,
                             learner: Learner = MLPQ(), mdp: LineMDP = LineMDP(),
                             grid: ArrayLike | None = None,
                             accountant: str = "exact") -> BaselineResult:
    """(eps, delta)-DP input perturbation (Venkitasubramaniam 2013; Wang & Hegde 2019,
    Fig. 2): :func:`train_perturbed_rewards` at :func:`input_perturbation_scale`; ``eps``
    one value or one per run."""
    rngs = _generators("rngs", rngs)
    stds = [input_perturbation_scale(config, e, delta, mdp, accountant=accountant)
            for e in _per_run("eps", eps, len(rngs))]
    return train_perturbed_rewards(config, stds, rngs, _privacy_streams(rngs),
                                   learner=learner, mdp=mdp, grid=grid)


def perturb_output(training: TrainResult, value_stds: ArrayLike,
                   noise_rngs: Sequence[np.random.Generator],
                   mdp: LineMDP = LineMDP()) -> BaselineResult:
    """NOT PRIVATE (utility only): output perturbation in the manner of Balle et al. (2016)
    of a trained DQN (Wang & Hegde 2019, Fig. 2): its grid values ``network_q`` plus
    ``value_stds[i]`` times a (G, A) standard normal draw from ``noise_rngs[i]``."""
    if not isinstance(training, TrainResult):
        raise ValueError(f"training must be a TrainResult, got {type(training).__name__}")
    n_runs = training.returns.shape[0]
    stds = _scales("value_stds", value_stds, n_runs)
    shape = training.network_q.shape[1:]
    noise = stds[:, None, None] * np.stack([rng.standard_normal(shape) for rng in
                                            _one_per_run(noise_rngs, n_runs)])
    return BaselineResult("output", stds, _true_returns(training, mdp), training.grid,
                          training.network_q + noise, training, noise)


def train_output_perturbation(config: QLearningConfig, eps: ArrayLike, delta: float,
                              rngs: Sequence[np.random.Generator], *,
                              learner: Learner = MLPQ(), mdp: LineMDP = LineMDP(),
                              grid: ArrayLike | None = None) -> BaselineResult:
    """NOT PRIVATE (utility only): the plain DQN (Wang & Hegde 2019, Alg. 1, sigma = 0),
    then :func:`perturb_output` at :func:`output_perturbation_scale` for the whole grid
    (G A values); ``eps`` one value or one per run."""
    rngs = _generators("rngs", rngs)
    eps_runs, noise_rngs = _per_run("eps", eps, len(rngs)), _privacy_streams(rngs)
    training = train(learner, config, np.zeros(len(rngs)), rngs, _mdp(mdp), grid)
    n_values = training.network_q[0].size
    stds = [output_perturbation_scale(config, e, delta, n_values, mdp) for e in eps_runs]
    return perturb_output(training, stds, noise_rngs, mdp)


def train_clipped_noisy_sgd(config: QLearningConfig, clip_norm: float | None,
                            noise_stds: ArrayLike, rngs: Sequence[np.random.Generator],
                            noise_rngs: Sequence[np.random.Generator], *,
                            hidden: Sequence[int] = (16, 16), mdp: LineMDP = LineMDP(),
                            grid: ArrayLike | None = None) -> BaselineResult:
    """DP-SGD (Abadi et al. 2016, Alg. 1) at given clip norm and noise stds (on the batch
    sum) inside the authors' DQN (Wang & Hegde 2019, Alg. 1 with sigma = 0), run i's
    gradient noise from ``noise_rngs[i]`` (:class:`~dprl.wang2019.dp_sgd.ClippedNoisyMLPQ`)."""
    rngs = _generators("rngs", rngs)
    stds = _scales("noise_stds", noise_stds, len(rngs))
    learner = ClippedNoisyMLPQ(tuple(hidden), clip_norm=clip_norm, noise_stds=stds,
                               noise_rngs=tuple(_one_per_run(noise_rngs, len(rngs))))
    training = train(learner, config, np.zeros(len(rngs)), rngs, _mdp(mdp), grid)
    return BaselineResult("dp_sgd", stds, _true_returns(training, mdp), training.grid,
                          training.network_q, training, None)


def train_dp_sgd(config: QLearningConfig, eps: ArrayLike, delta: float,
                 rngs: Sequence[np.random.Generator], *, clip_norm: float = 1.0,
                 hidden: Sequence[int] = (16, 16), mdp: LineMDP = LineMDP(),
                 grid: ArrayLike | None = None, accountant: str = "exact") -> BaselineResult:
    """(eps, delta)-DP DP-SGD (Abadi et al. 2016) on the authors' DQN under reward
    neighbours (Wang & Hegde 2019, Fig. 2): noise std ``z * 2 B C``, z from
    :func:`dp_sgd_noise_multiplier` (no amplification); ``eps`` one value or one per run."""
    rngs = _generators("rngs", rngs)
    sensitivity = dp_sgd_sensitivity(_config(config).batch_size, clip_norm)
    stds = [sensitivity * dp_sgd_noise_multiplier(config, e, delta, mdp, accountant=accountant)
            for e in _per_run("eps", eps, len(rngs))]
    return train_clipped_noisy_sgd(config, clip_norm, stds, rngs, _privacy_streams(rngs),
                                   hidden=hidden, mdp=mdp, grid=grid)


def baseline_sweep(method: str, config: QLearningConfig, eps_levels: Sequence[float],
                   delta: float, seeds: Sequence[int], root_seed: int,
                   mdp: LineMDP = LineMDP()) -> BaselineResult:
    """Fig. 2 of Wang & Hegde (2019) for one baseline: every eps level and seed in one
    batch, level-major (run ``k len(seeds) + i`` is level k, seed i), seed i with
    ``trial_generator(root_seed, seeds[i])`` at every level (common random numbers, as
    :func:`~dprl.wang2019.q_learning.sweep`); default options of each ``train_*``."""
    trainers = {"input": train_input_perturbation, "output": train_output_perturbation,
                "dp_sgd": train_dp_sgd}
    require_choice("method", method, METHODS)
    levels = require_array("eps_levels", eps_levels, ndim=1)
    seeds = [require_int("seed", s, minimum=0) for s in seeds]
    if not seeds:
        raise ValueError("seeds must not be empty")
    rngs = [trial_generator(root_seed, s) for _ in levels for s in seeds]
    return trainers[method](config, np.repeat(levels, len(seeds)), delta, rngs, mdp=mdp)


def evaluate_table_greedy(grid: ArrayLike, table: ArrayLike, n_episodes: int,
                          rngs: Sequence[np.random.Generator],
                          mdp: LineMDP = LineMDP()) -> np.ndarray:
    """Average undiscounted return (R,) of the greedy policy of a released Q table (R, G, A)
    on ``grid`` (G,), acting at the nearest grid point (ties: the lower one), over
    ``n_episodes`` episodes; the episodes' uniforms are drawn as in
    :func:`~dprl.wang2019.q_learning.evaluate_greedy` (Wang & Hegde 2019, Alg. 1 line 24),
    so both evaluate the same episodes given the same generators."""
    grid = require_array("grid", grid, ndim=1)
    table = require_array("table", table, ndim=3)
    if table.shape[1] != grid.size:
        raise ValueError(f"table must have one row per grid point ({grid.size}), got shape "
                         f"{table.shape}")
    n_episodes, mdp = require_int("n_episodes", n_episodes), _mdp(mdp)
    rngs = _one_per_run(rngs, table.shape[0])
    uniforms = np.stack([rng.random((mdp.horizon + 1, n_episodes)) for rng in rngs])
    states, total = uniforms[:, 0], np.zeros((len(rngs), n_episodes))
    runs = np.arange(len(rngs))[:, None]
    for t in range(mdp.horizon):
        nearest = np.argmin(np.abs(states[..., None] - grid), axis=2)
        states, rewards = mdp.transition(states, np.argmax(table[runs, nearest], axis=2),
                                         uniforms[:, t + 1])
        total += rewards
    return total.mean(axis=1)


# --- helpers -------------------------------------------------------------------------------

def _accountant(accountant: str) -> str:
    return require_choice("accountant", accountant, ACCOUNTANTS)


def _config(config: QLearningConfig) -> QLearningConfig:
    if not isinstance(config, QLearningConfig):
        raise ValueError(f"config must be a QLearningConfig, got {type(config).__name__}")
    return config


def _mdp(mdp: LineMDP) -> LineMDP:
    if not isinstance(mdp, LineMDP):
        raise ValueError(f"mdp must be a LineMDP, got {type(mdp).__name__}")
    return mdp


def _generators(name: str, rngs: Sequence[np.random.Generator]) -> list[np.random.Generator]:
    """``rngs`` as a non-empty list of numpy Generators."""
    rngs = list(rngs)
    if not rngs or not all(isinstance(r, np.random.Generator) for r in rngs):
        raise ValueError(f"{name} must be a non-empty sequence of numpy Generators")
    return rngs


def _one_per_run(rngs: Sequence[np.random.Generator],
                 n_runs: int) -> list[np.random.Generator]:
    """``rngs`` checked to be ``n_runs`` numpy Generators."""
    rngs = _generators("noise_rngs", rngs)
    if len(rngs) != n_runs:
        raise ValueError(f"need {n_runs} generators (one per run), got {len(rngs)}")
    return rngs


def _per_run(name: str, value: ArrayLike, n_runs: int) -> np.ndarray:
    """A scalar or one value per run, as an (R,) array."""
    array = require_array(name, value)
    if array.ndim == 0:
        return np.full(n_runs, float(array))
    if array.shape != (n_runs,):
        raise ValueError(f"{name} must be a scalar or have shape ({n_runs},), got "
                         f"{array.shape}")
    return array


def _scales(name: str, values: ArrayLike, n_runs: int) -> np.ndarray:
    """Noise stds, one per run, each >= 0."""
    values = require_array(name, values, shape=(n_runs,))
    if np.any(values < 0):
        raise ValueError(f"{name} must be >= 0, got min {values.min()}")
    return values


def _privacy_streams(rngs: list[np.random.Generator]) -> list[np.random.Generator]:
    """Child ``_PRIVACY_CHILD`` of each run's seed sequence, spawned from a copy so that
    the generator handed to ``train`` is untouched."""
    return [copy.deepcopy(rng).spawn(_PRIVACY_CHILD + 1)[-1] for rng in rngs]


def _true_returns(training: TrainResult, mdp: LineMDP) -> np.ndarray:
    """Undiscounted return (R, E) of each training episode under the true reward
    ``r(s')`` of the line MDP (Wang & Hegde 2019, App. E.1)."""
    return mdp.reward(training.states[:, :, 1:]).sum(axis=2)
