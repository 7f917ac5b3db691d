"""Pins numpy's floating-point configuration (dprl.floating_point) before any test or chapter
kernel loads numpy: chapters' kernels inherit this process's environment. Orders the files
so that the longest start first (:data:`LONGEST_FIRST`)."""

import dprl  # noqa: F401

#: The files that take longest on two cores (20-200 s each, measured with --durations=0),
#: longest first. `make test` runs pytest-xdist with --dist loadfile --no-loadscope-reorder,
#: which hands out whole files in collection order as workers free up: run first, they do
#: not leave one worker computing alone at the end while the other waits.
LONGEST_FIRST = (
    "tests/test_results.py", "tests/test_spot_check_sharma2025_training.py",
    "tests/test_dask_runner.py", "tests/test_spot_check_wang2019.py",
    "tests/test_spot_check_xie2019_chain.py", "tests/test_spot_check_mountain_car.py",
    "book/xie2019/privacy-analysis.ipynb", "tests/test_vendor_bits.py",
    "tests/test_spot_check_audits.py", "book/xie2019/mountain-car.ipynb",
    "tests/test_spot_check_hiv.py", "tests/test_audit_experiments.py", "tests/test_bench.py",
    "book/balle2016/utility.ipynb", "book/sharma2025/setting.ipynb",
    "book/appendix/audits.ipynb")


def pytest_collection_modifyitems(items) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
