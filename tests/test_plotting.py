import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from dprl.plotting import band, mean_and_spread, use_book_style  # noqa: E402


def test_spread_is_sample_sd_or_standard_error():
    values = np.array([[1.0, 2.0], [3.0, 6.0], [5.0, 10.0]])
    mean, sd = mean_and_spread(values, "sd")
    np.testing.assert_allclose(mean, [3.0, 6.0])
    np.testing.assert_allclose(sd, [2.0, 4.0])
    _, se = mean_and_spread(values, "se")
    np.testing.assert_allclose(se, np.array([2.0, 4.0]) / np.sqrt(3))


def test_band_draws_mean_line_and_shaded_band():
    use_book_style()
    fig, ax = plt.subplots()
    band(ax, np.arange(2), np.array([[1.0, 2.0], [3.0, 4.0]]), "LSTD", "sd")
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [2.0, 3.0])
    assert len(ax.collections) == 1
    plt.close(fig)


@pytest.mark.parametrize("values, spread", [(np.ones((1, 3)), "se"), (np.ones((3, 3)), "iqr"),
                                            (np.full((2, 2), np.nan), "sd")])
def test_bad_inputs(values, spread):
    with pytest.raises(ValueError):
        mean_and_spread(values, spread)
