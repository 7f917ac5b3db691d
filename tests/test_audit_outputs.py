"""Every registered audit's statistic comes from what the package function it names
(:data:`dprl.experiments.audits.common.SAMPLED`) returned (issue 41 item 1): calling the function is
not enough, the histograms must be built from its output.

For each audit, the named function is replaced, where the audit looks it up, by a recorder
that calls the real function and records what it returned (for the DP-SGD steps, which
return an int or a bool and update the Q-network in place: the parameters before and after
the call). The statistics the audit histograms are captured on their way into
:func:`dprl.audit.histogram`. Two properties are tested on one trial at a reduced smoke
scale:

- *rebuilt*: the statistics are the audit's score of the recorded outputs (bit for bit where
  the rebuild repeats the audit's arithmetic, to rounding where it is an independent
  formula), the histograms are those of the statistics, and recording changes nothing;
- *perturbed*: the recorder hands the audit a perturbed output instead (a shift of the
  release, a drift of GPOPE's iterates, the canary added to the noise paths, nothing
  released, the parameters pushed along a canary's direction, the selective step's coin
  flipped) and the statistics follow as predicted from the unperturbed run's records, moving
  well beyond the prediction's tolerance.

An audit that called the function and histogrammed idealised draws instead (the sceptic's
mutation) fails both. Every audit in SAMPLED must have a case here; the one-run audits, whose
statistic is a score per canary, are tested at the end, and every registered audit must be one
or the other.
"""

from __future__ import annotations

import dataclasses
import importlib
from functools import cache

import numpy as np
import pytest
from scipy import stats

from dprl.audit import histogram
from dprl.experiments import all_experiments, get
from dprl.experiments.audits import common as audits_module
from dprl.experiments.audits.common import SAMPLED
from dprl.engine.batches import compute_trials
from dprl.mechanisms import analytic_gaussian_sigma, laplace_scale

AUDITS = [e.id for e in all_experiments() if e.id in SAMPLED]
WORLDS = ("null", "alternative")


def _wrap(mp: pytest.MonkeyPatch, name: str, make) -> None:
    """Replace ``module.attribute`` (``name``) by ``make(original)`` where the audits look it
    up."""
    module_name, attribute = name.rsplit(".", 1)
    module = importlib.import_module(module_name)
    mp.setattr(module, attribute, make(getattr(module, attribute)))


class Case:
    """How one audit is recorded, rebuilt and perturbed. ``wrapped``: the SAMPLED names it
    replaces; ``perturbations``: the perturbed outputs tried; ``rtol``/``atol``: the rebuild's
    tolerance (0: bit for bit) and ``predict_atol`` the prediction's; ``move``: how far a
    statistic must move to count as moved."""

    wrapped: tuple[str, ...]
    perturbations: tuple[str, ...]
    rtol = atol = 0.0
    predict_atol = 1e-8
    move = 1e-2

    def config(self, smoke):
        raise NotImplementedError

    def install(self, mp, config, perturbation: str | None) -> list:
        """Wrap the named function(s); return the list the records go to."""
        raise NotImplementedError

    def rebuild(self, config, records) -> tuple[np.ndarray, np.ndarray]:
        """The (null, alternative) statistics from the recorded outputs."""
        raise NotImplementedError

    def predict(self, config, records, perturbation: str) -> tuple[np.ndarray, np.ndarray]:
        """The statistics of the perturbed run, from the unperturbed run's records."""
        raise NotImplementedError


# -- the Gaussian and Laplace mechanisms: the release in units of the noise's scale ----------

class ScaledRelease(Case):
    """``audit-gaussian`` / ``audit-laplace``: the statistic is the release / scale, so a
    release shifted by ``3 scale`` moves every statistic by 3."""

    perturbations = ("shift by 3 scales",)
    shift = 3.0

    def __init__(self, name: str, scale) -> None:
        self.wrapped, self.scale = (name,), scale

    def config(self, smoke):
        return dataclasses.replace(smoke, runs_per_trial=500)

    def install(self, mp, config, perturbation):
        records = []

        def make(original):
            def recorder(*args, **kwargs):
                release = original(*args, **kwargs)
                records.append(np.array(release, copy=True))
                if perturbation is None:
                    return release
                return release + self.shift * self.scale(config)
            return recorder

        _wrap(mp, self.wrapped[0], make)
        return records

    def rebuild(self, config, records):
        assert len(records) == 2  # one call per world
        return tuple(release / self.scale(config) for release in records)

    def predict(self, config, records, perturbation):
        return tuple(release / self.scale(config) + self.shift for release in records)


# -- DP-LSW, DP-LSL: the exact log-likelihood ratio of the release ---------------------------

class BalleRelease(Case):
    """``audit-balle2016-*``: the release is scored by ``log N(o; mu', s'^2) - log N(o; mu,
    s^2)``, rebuilt independently with scipy; the perturbation shifts every release by five
    noise scales towards the neighbour's mean."""

    perturbations = ("shift towards the neighbour",)
    rtol, atol, predict_atol = 1e-9, 1e-9, 1e-9

    def __init__(self, function: str) -> None:
        self.wrapped = (f"dprl.balle2016.{function}",)

    def config(self, smoke):
        return dataclasses.replace(smoke, runs_per_trial=200)

    @staticmethod
    def shift(config) -> np.ndarray:
        (mean, sigma), (mean_neighbour, _) = config.releases()
        return 5 * sigma * (mean_neighbour - mean) / np.linalg.norm(mean_neighbour - mean)

    def install(self, mp, config, perturbation):
        records = []

        def make(original):
            def recorder(*args, **kwargs):
                release = original(*args, **kwargs)
                records.append(np.array(release, copy=True))
                return release if perturbation is None else release + self.shift(config)
            return recorder

        _wrap(mp, self.wrapped[0], make)
        return records

    def rebuild(self, config, records):
        assert len(records) == 2
        (mean, sigma), (mean_neighbour, sigma_neighbour) = config.releases()
        return tuple((stats.norm.logpdf(release, mean_neighbour, sigma_neighbour)
                      - stats.norm.logpdf(release, mean, sigma)).sum(axis=-1)
                     for release in records)

    def predict(self, config, records, perturbation):
        return self.rebuild(config, [release + self.shift(config) for release in records])


# -- GPOPE: the log-likelihood ratio of the noisy gradients read off the iterates ------------

class GPOPEIterates(Case):
    """``audit-xie2019-*``: the audit reads the released gradients ``(xi_{t-1} - xi_t) /
    beta`` off the iterates :func:`gpope_runs` returns. The perturbation drifts iterate ``t``
    by ``-t beta v``, ``v = sigma (g' - g)`` at the start (the canary's clipped gradient
    minus ``tau``'s): every released gradient moves by ``v``, towards the canary's."""

    wrapped = ("dprl.xie2019.gpope.gpope_runs",)
    perturbations = ("drift towards the canary",)

    def config(self, smoke):
        return dataclasses.replace(smoke, runs_per_trial=20)

    @staticmethod
    def drift(config, theta, w):
        from dprl.experiments.audits import xie2019 as audits_xie2019
        prepared = config.prepared()
        n = prepared.n_features
        g, g_canary = audits_xie2019.clipped_gradients(config, prepared, np.zeros((1, 2 * n)))
        v = config.sigma * (g_canary - g)[0]
        steps = np.arange(theta.shape[1])[:, None] * config.step_size
        return theta - steps * v[:n], w - steps * v[n:]

    def install(self, mp, config, perturbation):
        records = []

        def make(original):
            def recorder(*args, **kwargs):
                theta, w = original(*args, **kwargs)
                records.append((np.array(theta, copy=True), np.array(w, copy=True)))
                return (theta, w) if perturbation is None else self.drift(config, theta, w)
            return recorder

        _wrap(mp, self.wrapped[0], make)
        return records

    def rebuild(self, config, records):
        from dprl.experiments.audits import xie2019 as audits_xie2019
        (theta, w), = records  # one call for both worlds
        runs = config.runs_per_trial
        assert theta.shape[:2] == (2 * runs, config.n_iterations + 1)
        scores = audits_xie2019.canary_log_likelihood_ratio(
            config, config.prepared(), np.concatenate([theta, w], axis=-1))
        return scores[:runs], scores[runs:]

    def predict(self, config, records, perturbation):
        return self.rebuild(config, [self.drift(config, *records[0])])


# -- Wang 2019: the noise paths of RunPaths ---------------------------------------------------

class NoisePaths(Case):
    """``audit-wang2019-*``: the releases are the paths' values (``RunPaths.refresh``) read
    by each update plus the canary in ``D'``. Fresh paths: adding the canary ``Delta f`` to
    every path makes ``D`` look like ``D'``, moving every statistic by exactly ``mu =
    sqrt(T/B) sqrt(C) / sigma`` (the statistic is linear). Reused paths: the statistic reads
    differences of releases on one path, so a value of 1e30 added to every path swamps the
    canary: every statistic becomes 0 (``D'``'s were 1)."""

    wrapped = ("dprl.wang2019.run_paths.RunPaths",)

    def __init__(self, reuse: bool, runs: int) -> None:
        self.reuse, self.runs = reuse, runs
        self.perturbations = ("swamped",) if reuse else ("canary added to the noise",)

    def config(self, smoke):
        return dataclasses.replace(smoke, runs_per_trial=self.runs)

    def perturb(self, config, values):
        if self.reuse:
            return values + 1e30
        return values + config.canary[None, :, None]

    def install(self, mp, config, perturbation):
        records, case = [], self

        def make(original):
            class RecordingPaths:
                """The real sampler, its fresh paths recorded (and perturbed)."""

                def __init__(self, *args, **kwargs):
                    self._paths = original(*args, **kwargs)

                def refresh(self, points):
                    values = self._paths.refresh(points)
                    records.append(np.array(values, copy=True))
                    return values if perturbation is None else case.perturb(config, values)

                def __getattr__(self, name):
                    return getattr(self._paths, name)

            return RecordingPaths

        _wrap(mp, self.wrapped[0], make)
        return records

    def worlds(self, config, records) -> list[np.ndarray]:
        """The recorded path values of each world's runs (the calls come world by world)."""
        out, runs = [[], []], config.runs_per_trial
        for values in records:
            world = 0 if sum(len(v) for v in out[0]) < runs else 1
            out[world].append(values)
        return [np.concatenate(world) for world in out]

    def rebuild(self, config, records):
        worlds = self.worlds(config, records)
        assert [len(v) for v in worlds] == [config.runs_per_trial] * 2
        return tuple(config.score(values[:, :, config.update_paths] + world * config.canaries)
                     for world, values in enumerate(worlds))

    def predict(self, config, records, perturbation):
        if self.reuse:
            return np.zeros(config.runs_per_trial), np.zeros(config.runs_per_trial)
        calibration = config.calibration
        mu = np.sqrt(config.n_updates * calibration.constant) / calibration.sigma
        return tuple(statistic + mu for statistic in self.rebuild(config, records))


# -- Sharma 2025's DataRelease: the released prefixes -------------------------------------------

class ReleasedPrefixes(Case):
    """``audit-sharma2025-release``: each run's statistic sums the log-likelihood ratios of
    its ``T`` outputs, the prefixes ``data_release`` released of the recorded trajectories.
    Perturbed: nothing released (every prefix length 0), so every statistic is ``T`` times
    the log ratio of "nothing"."""

    wrapped = ("dprl.sharma2025.release.data_release",)
    perturbations = ("nothing released",)
    predict_atol = 1e-12

    def config(self, smoke):
        return dataclasses.replace(smoke, runs_per_trial=8)

    def install(self, mp, config, perturbation):
        from dprl.experiments.audits import sharma2025 as audits_sharma2025
        records = []

        def make_trajectories(original):
            def recorder(*args, **kwargs):
                states, actions = original(*args, **kwargs)
                records.append(("trajectories", states.copy(), actions.copy()))
                return states, actions
            return recorder

        def make(original):
            def recorder(*args, **kwargs):
                result = original(*args, **kwargs)
                records.append(("release", result))
                if perturbation is None:
                    return result
                return dataclasses.replace(result,
                                           prefix_lengths=np.zeros_like(result.prefix_lengths))
            return recorder

        mp.setattr(audits_sharma2025, "record_toy_trajectories",
                   make_trajectories(audits_sharma2025.record_toy_trajectories))
        _wrap(mp, self.wrapped[0], make)
        return records

    @staticmethod
    def outputs(config, states, actions, result) -> np.ndarray:
        """The index of each query's output: 0 if nothing was released, else the released
        prefix ``(s_0, a_0, s_1, ..., s_k)`` read as binary digits, after the ``2^(2j+1)``
        prefixes of every shorter length ``1 <= j < k``."""
        out = []
        for t, k in zip(result.queried, result.prefix_lengths):
            if k == 0:
                out.append(0)
                continue
            digits = [states[t, 0]]
            for step in range(k):
                digits += [actions[t, step], states[t, step + 1]]
            code = int("".join(str(int(d)) for d in digits), 2)
            out.append(1 + sum(2 ** (2 * j + 1) for j in range(1, k)) + code)
        assert len(out) == config.n_queries
        return np.array(out)

    def rebuild(self, config, records):
        from dprl.experiments.audits import sharma2025 as audits_sharma2025
        log_ratios = audits_sharma2025.release_log_ratios(config)
        kinds = [record[0] for record in records]
        assert kinds == ["trajectories", "release"] * (2 * config.runs_per_trial)
        statistics = [[], []]
        for i in range(0, len(records), 2):
            (_, states, actions), (_, result) = records[i], records[i + 1]
            statistics[i // 2 % 2].append(
                log_ratios[self.outputs(config, states, actions, result)].sum())
        return tuple(np.array(world) for world in statistics)

    def predict(self, config, records, perturbation):
        from dprl.experiments.audits import sharma2025 as audits_sharma2025
        nothing = config.n_queries * audits_sharma2025.release_log_ratios(config)[0]
        return (np.full(config.runs_per_trial, nothing),) * 2


# -- Sharma 2025's DP-SGD steps: the parameters they update ---------------------------------

class DPSGDSteps(Case):
    """``audit-sharma2025-dp-sgd`` / ``-selective``: the step returns the batch size (Alg. 4)
    or its coin (Alg. 3) and updates the Q-network; the audit projects ``b (phi_before -
    phi_after) / eta`` on each canary's direction ``u`` and sums the per-step log-likelihood
    ratios over the DP steps. Recorded per call: ``u`` (the auditor's
    :func:`canary_directions` at the parameters before), the parameters before and after,
    the coin. Perturbed: after every DP step, the even canaries' rows pushed by ``-K C eta /
    b u`` (their projections grow by ``K``: the statistic of those runs is predicted from the
    unperturbed projections plus ``K``, by an independent mixture density, the odd runs'
    unchanged); for Alg. 3, the returned coin flipped (the statistic then sums the other
    steps)."""

    push = 1.0
    predict_atol = 1e-3

    def __init__(self, function: str) -> None:
        self.wrapped = (f"dprl.sharma2025.dp_sgd.{function}",)
        self.selective = function == "selective_dp_sgd_step"
        self.perturbations = (("parameters pushed", "coin flipped") if self.selective
                              else ("parameters pushed",))

    def config(self, smoke):
        return dataclasses.replace(smoke, runs_per_trial=6, n_steps=20)

    def pushed(self, config) -> np.ndarray:
        return self.push * (np.arange(config.runs_per_trial) % 2 == 0)

    def install(self, mp, config, perturbation):
        import torch

        from dprl.experiments.audits import sharma2025_training as training
        records = []
        canaries = training.canary_transitions(config.runs_per_trial, config.reward)
        pushed = self.pushed(config)

        def parameters(layer) -> np.ndarray:
            return np.stack([layer.weight.detach().numpy()[:, 0],
                             layer.bias.detach().numpy()], axis=1).copy()

        def make(original):
            def recorder(learner, target, *args, **kwargs):
                layer = learner.q.layers[0]
                directions = training.canary_directions(learner, canaries, target, config.clip)
                before = parameters(layer).astype(np.float64)
                out = original(learner, target, *args, **kwargs)
                private = bool(out) if self.selective else True
                if perturbation == "parameters pushed" and private:
                    step = (-config.clip * config.learning_rate / config.expected_batch
                            * pushed[:, None] * directions)
                    with torch.no_grad():
                        layer.weight[:, 0] += torch.as_tensor(step[:, 0], dtype=torch.float32)
                        layer.bias += torch.as_tensor(step[:, 1], dtype=torch.float32)
                records.append(dict(directions=directions, before=before,
                                    after=parameters(layer), private=private))
                return (not out) if perturbation == "coin flipped" else out
            return recorder

        _wrap(mp, self.wrapped[0], make)
        return records

    def _sum(self, config, records, llr, flip=False, push=None):
        """Per world, the per-step log-likelihood ratios ``llr`` of the projections summed
        over the steps counted as DP steps (the recorded coin, or its flip)."""
        assert len(records) == 2 * config.n_steps  # D's training, then D''s
        out = []
        for world in (records[:config.n_steps], records[config.n_steps:]):
            total = np.zeros(config.runs_per_trial)
            for record in world:
                if record["private"] != flip:
                    noisy_sum = ((record["before"] - record["after"]) * config.expected_batch
                                 / config.learning_rate)
                    x = (noisy_sum * record["directions"]).sum(axis=1) / config.clip
                    total += llr(x if push is None else x + push)
            out.append(total)
        return tuple(out)

    def rebuild(self, config, records):
        from dprl.experiments.audits.sharma2025_dp_sgd import dp_step_log_likelihood_ratio
        return self._sum(config, records, lambda x: dp_step_log_likelihood_ratio(
            x, config.noise_multiplier, config.sampling_rate))

    def predict(self, config, records, perturbation):
        s, q = config.noise_multiplier, config.sampling_rate

        def llr(x):  # log((1 - q) N(x; 0, s^2) + q N(x; 1, s^2)) - log N(x; 0, s^2)
            null = stats.norm.logpdf(x, 0.0, s)
            return np.logaddexp(np.log1p(-q) + null,
                                np.log(q) + stats.norm.logpdf(x, 1.0, s)) - null

        if perturbation == "coin flipped":
            return self._sum(config, records, llr, flip=True)
        return self._sum(config, records, llr, push=self.pushed(config))


CASES: dict[str, Case] = {
    "audit-gaussian": ScaledRelease(
        "dprl.mechanisms.gaussian_mechanism",
        lambda c: analytic_gaussian_sigma(1.0, c.eps, c.delta)),
    "audit-laplace": ScaledRelease("dprl.mechanisms.laplace_mechanism",
                                   lambda c: laplace_scale(1.0, c.eps)),
    "audit-balle2016-lsw": BalleRelease("dp_lsw"),
    "audit-balle2016-lsl": BalleRelease("dp_lsl"),
    "audit-xie2019-paper": GPOPEIterates(),
    "audit-xie2019-sound": GPOPEIterates(),
    "audit-xie2019-pld": GPOPEIterates(),
    **{f"audit-wang2019-{variant}{suffix}": NoisePaths(False, runs)
       for variant in ("proof", "statement")
       for suffix, runs in (("", 20), ("-one-update", 20), ("-updates", 4))},
    "audit-wang2019-reuse": NoisePaths(True, 4),
    "audit-sharma2025-release": ReleasedPrefixes(),
    "audit-sharma2025-dp-sgd": DPSGDSteps("expert_dp_sgd_step"),
    "audit-sharma2025-selective": DPSGDSteps("selective_dp_sgd_step"),
}


@dataclasses.dataclass(frozen=True)
class Run:
    """One instrumented trial: its config, the statistics the audit histogrammed (null,
    alternative), the histograms it returned and the recorder's records."""

    config: object
    statistics: tuple[np.ndarray, np.ndarray]
    arrays: dict
    records: list


def _case(experiment_id: str) -> Case:
    if experiment_id not in CASES:
        pytest.fail(f"{experiment_id} has no case in tests/test_audit_outputs.py: nothing "
                    f"shows that its statistic comes from {SAMPLED[experiment_id]}")
    return CASES[experiment_id]


@cache
def _run(experiment_id: str, perturbation: str | None = None) -> Run:
    """Trial 0 of the audit at its case's scale, with the named function recorded (and its
    output perturbed)."""
    case, experiment = _case(experiment_id), get(experiment_id)
    config = case.config(experiment.config("smoke"))
    statistics = []

    def recording_histogram(samples, edges):
        statistics.append(np.array(samples, copy=True))
        return histogram(samples, edges)

    with pytest.MonkeyPatch.context() as mp:
        records = case.install(mp, config, perturbation)
        mp.setattr(audits_module, "histogram", recording_histogram)
        arrays = compute_trials(experiment, config, [0])
    assert len(statistics) == 2, "the audit must histogram one null and one alternative array"
    return Run(config, tuple(statistics), arrays, records)


def test_every_sampled_audit_has_a_case_wrapping_the_functions_it_names():
    assert set(AUDITS) == set(SAMPLED) and len(AUDITS) >= 16
    missing = sorted(set(SAMPLED) - set(CASES))
    assert not missing, f"audits without a statistic-from-output case: {missing}"
    assert set(CASES) <= set(SAMPLED), sorted(set(CASES) - set(SAMPLED))
    for experiment_id, case in CASES.items():
        assert set(case.wrapped) == set(SAMPLED[experiment_id]), experiment_id
        assert case.perturbations, experiment_id


@pytest.mark.parametrize("experiment_id", AUDITS)
def test_histograms_are_built_from_the_named_functions_outputs(experiment_id):
    case, run = _case(experiment_id), _run(experiment_id)
    assert run.records, f"{SAMPLED[experiment_id]} was never called"
    # recording is transparent: the audit's own histograms, uninstrumented
    plain = compute_trials(get(experiment_id), run.config, [0])
    assert plain.keys() == run.arrays.keys()
    for name in plain:
        np.testing.assert_array_equal(run.arrays[name], plain[name], err_msg=name)
    rebuilt = case.rebuild(run.config, run.records)
    for world, statistic, expected in zip(WORLDS, run.statistics, rebuilt):
        assert statistic.shape == (run.config.runs_per_trial,), world
        message = f"{experiment_id}: the {world} statistics are not those of the recorded outputs"
        if case.rtol == case.atol == 0:
            np.testing.assert_array_equal(statistic, expected, err_msg=message)
        else:
            np.testing.assert_allclose(statistic, expected, rtol=case.rtol, atol=case.atol,
                                       err_msg=message)
        np.testing.assert_array_equal(run.arrays[f"{world}_counts"],
                                      histogram(statistic, run.config.edges)[None], err_msg=world)


@pytest.mark.parametrize("experiment_id", AUDITS)
def test_perturbing_the_named_functions_output_moves_the_statistic(experiment_id):
    case, base = _case(experiment_id), _run(experiment_id)
    for perturbation in case.perturbations:
        moved = _run(experiment_id, perturbation)
        predicted = case.predict(base.config, base.records, perturbation)
        for world, statistic, expected in zip(WORLDS, moved.statistics, predicted):
            np.testing.assert_allclose(
                statistic, expected, rtol=1e-9, atol=case.predict_atol,
                err_msg=f"{experiment_id}, {perturbation}: the {world} statistics do not "
                        f"follow the perturbed output of {SAMPLED[experiment_id]}")
        change = np.abs(np.concatenate(moved.statistics) - np.concatenate(base.statistics))
        assert np.mean(change > max(case.move, 100 * case.predict_atol)) >= 0.4, (
            f"{experiment_id}, {perturbation}: the perturbation hardly moves the statistic "
            f"(largest change {change.max():.3g}), so it proves nothing")
        assert any(not np.array_equal(moved.arrays[f"{world}_counts"],
                                      base.arrays[f"{world}_counts"]) for world in WORLDS)


# The one-run audits (Steinke et al. 2023) are not in SAMPLED: their statistic is a score per
# canary, the released gradients' projection on its direction summed over the steps, not a
# histogram. The released gradient is what dprl.sharma2025.dp_sgd.expert_dp_sgd_step hands the
# optimiser; the auditor reads it in a pre-step hook. Scaling it, for the auditor only, by a
# power of two or by -1 (undone by a later hook before the update, so the run is unchanged)
# must scale every score exactly: the scores are linear in the released gradients, and an
# audit that scored idealised draws would not follow.
ONE_RUN_AUDITS = [e.id for e in all_experiments()
                  if e.run_trials is importlib.import_module(
                      "dprl.experiments.audits.one_run").one_run_audit_trials]


def _released_scaled(step, factor: float, calls: list):
    """``step`` (expert_dp_sgd_step) whose noisy gradient the optimiser's pre-step hooks
    registered before the call (the auditor's) see times ``factor``; the update sees it as
    it was."""
    def scaled(learner, target, pool, config, optimizer, generator):
        calls.append(factor)
        parameters = list(learner.parameters())

        def scale(by: float) -> None:
            for parameter in parameters:
                parameter.grad.mul_(by)

        restore = optimizer.register_step_pre_hook(lambda *_: scale(1 / factor))
        inner = optimizer.step
        optimizer.step = lambda *args, **kwargs: (scale(factor), inner(*args, **kwargs))[1]
        try:
            return step(learner, target, pool, config, optimizer, generator)
        finally:
            restore.remove()
            del optimizer.step
    return scaled


@cache
def _one_run(experiment_id: str, factor: float | None) -> tuple[dict, list]:
    """Trial 0 of a one-run audit at smoke scale, its released gradients scaled by ``factor``
    for the auditor (None: no wrapper)."""
    experiment, calls = get(experiment_id), []
    with pytest.MonkeyPatch.context() as mp:
        if factor is not None:
            _wrap(mp, "dprl.sharma2025.dp_sgd.expert_dp_sgd_step",
                  lambda step: _released_scaled(step, factor, calls))
        arrays = compute_trials(experiment, experiment.config("smoke"), [0])
    return arrays, calls


def test_every_audit_is_covered_by_an_output_test():
    audits = {e.id for e in all_experiments() if e.id.startswith("audit-")}
    assert audits == set(SAMPLED) | set(ONE_RUN_AUDITS), sorted(
        audits - set(SAMPLED) - set(ONE_RUN_AUDITS))
    assert sorted(ONE_RUN_AUDITS) == ["audit-sharma2025-one-run",
                                      "audit-sharma2025-one-run-pilot"]


@pytest.mark.parametrize("experiment_id", ONE_RUN_AUDITS)
def test_one_run_scores_are_linear_in_the_released_gradients(experiment_id):
    plain, _ = _one_run(experiment_id, None)
    base, calls = _one_run(experiment_id, 1.0)
    assert len(calls) == get(experiment_id).config("smoke").steps
    for name in plain:  # the wrapper is transparent
        np.testing.assert_array_equal(base[name], plain[name], err_msg=name)
    assert np.mean(base["scores"] != 0) >= 0.4
    for factor in (2.0, -1.0):
        moved, _ = _one_run(experiment_id, factor)
        np.testing.assert_array_equal(moved["included"], base["included"])
        np.testing.assert_array_equal(
            moved["scores"], factor * base["scores"],
            err_msg=f"{experiment_id}: the scores do not follow the released gradients "
                    f"scaled by {factor}")
        np.testing.assert_array_equal(moved["noise_multiplier"], base["noise_multiplier"])
