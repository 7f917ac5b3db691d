import numpy as np
import pytest

from dprl.__main__ import main
from dprl.bench import BENCHMARKS, run_benchmarks


def test_quick_benchmarks_report_a_ratio(capsys):
    assert main(["bench", "--quick"]) == 0
    out = capsys.readouterr().out
    for name in BENCHMARKS:
        assert f"{name}:" in out and "speed-up x" in out


def test_benchmarks_do_equivalent_work():
    bench = BENCHMARKS["chain-sampler"]
    assert bench.candidate(50).lengths.shape == (50,)
    dp_lsw = BENCHMARKS["dp-lsw"]
    vectorised, looped = dp_lsw.candidate(60), np.array(dp_lsw.reference(60))
    np.testing.assert_allclose(vectorised, looped, rtol=1e-12)
    gpope = BENCHMARKS["gpope"]
    vectorised = np.concatenate(gpope.candidate(12), axis=1)
    np.testing.assert_allclose(vectorised, np.array(gpope.reference(12)), rtol=1e-10, atol=1e-13)
    statistics = BENCHMARKS["chain-statistics"]
    exact, simulated = statistics.candidate(30_000), statistics.reference(30_000)
    assert exact.n_trajectories == simulated.n_trajectories == 30_000
    p = exact.counts / 30_000
    assert np.all(np.abs(exact.counts - simulated.counts) < 6 * np.sqrt(30_000 * p * (1 - p)) + 1)


def test_unknown_benchmark_is_rejected():
    with pytest.raises(ValueError, match="unknown benchmarks"):
        run_benchmarks(["nope"])


def test_scaling_benchmark_reports_its_slope_and_goal(capsys):
    (report,) = run_benchmarks(["ou-scaling"], quick=True)
    out = capsys.readouterr().out
    assert "log-log slope" in out and "goal <= 1.2" in out
    assert 0.5 < report["slope"] < 2.5 and len(report["times_s"]) == 2


def test_overhead_benchmark_reports_an_upper_goal(capsys):
    (report,) = run_benchmarks(["dp-sgd-overhead"], quick=True)
    out = capsys.readouterr().out
    assert "goal <= 1.6" in out and report["speedup"] > 0
    assert BENCHMARKS["dp-sgd-overhead"].at_most and not BENCHMARKS["dp-sgd-step"].at_most


def test_xie_calibration_and_hiv_benchmarks_do_equivalent_work():
    # dp-accounting's per-order loops take about 3 s a curve: one noise multiplier there
    for name, rtol, curves in (("gpope-calibration-wbk9", 1e-12, 2),
                               ("gpope-calibration-wbk27", 1e-7, 1)):
        bench = BENCHMARKS[name]
        for ours, theirs in zip(bench.candidate(curves), bench.reference(curves), strict=True):
            np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=0)
    hiv = BENCHMARKS["hiv-behaviour-data"]
    batched, ratios = hiv.candidate(2)
    for k, (data, ratio) in enumerate(hiv.reference(2)):
        np.testing.assert_array_equal(batched.rewards[k], data.rewards)
        np.testing.assert_array_equal(ratios[k], ratio)


def test_batching_ceiling_replays_every_product_of_a_plain_step():
    """The target's forward (3 products), the Q-network's (3) and the backward (5: the
    first layer's input needs no gradient) of a 2 x 256 CQL step on 256 4-D transitions."""
    import dprl.kernels
    from dprl.sharma2025.benchmarks import _plain_step_products

    products = _plain_step_products()
    assert dprl.kernels.matmul.__name__ == "matmul"  # the recording is undone
    shapes = [(a.shape, b.shape) for a, b in products]
    forward = [((256, 4), (4, 256)), ((256, 256), (256, 256)), ((256, 256), (256, 2))]
    backward = [((256, 2), (2, 256)), ((2, 256), (256, 256)), ((256, 256), (256, 256)),
                ((256, 256), (256, 256)), ((256, 256), (256, 4))]
    assert shapes == forward + forward + backward
    assert BENCHMARKS["batching-ceiling"].reference.__name__ == "_plain_sgd_steps"
