import numpy as np
import pytest

from dprl.validation import (require_array, require_choice, require_delta, require_epsilon,
                             require_in_bounds, require_int, require_positive,
                             require_folder, require_probability)


@pytest.mark.parametrize("value", [True, np.True_, "2", None, 1 + 2j])
def test_non_real_scalars_are_refused_not_coerced(value):
    with pytest.raises(ValueError, match="must be a real number"):
        require_positive("x", value)


@pytest.mark.parametrize("value", [[True, False], ["1", "2"], [None]])
def test_non_real_arrays_are_refused_not_coerced(value):
    with pytest.raises(ValueError, match="must hold real numbers"):
        require_array("x", value)


def test_privacy_parameters():
    assert require_epsilon(0.5) == 0.5 and require_delta(1e-5) == 1e-5
    for bad in (0.0, -1.0, np.inf, np.nan):
        with pytest.raises(ValueError, match="eps"):
            require_epsilon(bad)
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match=r"delta must lie in \(0, 1\)"):
            require_delta(bad)


def test_shapes_bounds_integers_and_probabilities():
    assert require_array("x", [[1, 2]], shape=(1, None)).dtype == float
    with pytest.raises(ValueError, match=r"shape \(2, 'any'\)"):
        require_array("x", [[1, 2]], shape=(2, None))
    with pytest.raises(ValueError, match="must not be empty"):
        require_array("x", [])
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        require_in_bounds("rewards", np.array([0.5, np.nan]), 0, 1)
    with pytest.raises(ValueError, match="integer"):
        require_int("n", 2.0)
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        require_probability("q", 0.0, open_low=True)


def test_require_choice_returns_a_known_value_and_names_the_argument_otherwise():
    assert require_choice("kernels", "portable", ("portable", "vendor")) == "portable"
    with pytest.raises(ValueError, match=r"kernels must be one of \('portable', 'vendor'\), "
                                         r"got 'x'"):
        require_choice("kernels", "x", ("portable", "vendor"))
    # a mapping's keys and a set are listed sorted; unhashable values are refused, not raised
    with pytest.raises(ValueError, match=r"env must be one of \['Acrobot', 'CartPole'\]"):
        require_choice("env", "HIV", {"CartPole": 1, "Acrobot": 2})
    with pytest.raises(ValueError, match="method must be one of"):
        require_choice("method", ["dpsgd"], {"dpsgd", "ours"})


def test_require_folder_takes_existing_folders_only(tmp_path):
    assert require_folder("results_dir", tmp_path) == tmp_path
    assert require_folder("results_dir", str(tmp_path)) == tmp_path
    for value in (3, None, tmp_path / "missing", str(tmp_path / "missing")):
        with pytest.raises(ValueError, match="results_dir must be an existing folder"):
            require_folder("results_dir", value)
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="results_dir"):
        require_folder("results_dir", tmp_path / "file")
