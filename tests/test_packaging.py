"""pyproject.toml and environment.yml describe the same environment; the commands are wired."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ ]", requirement, maxsplit=1)[0].lower()


def _pyproject_requirements() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    return {_name(r): r.replace(" ", "") for r in requirements}


def _conda_pip_requirements() -> dict[str, str]:
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in environment["dependencies"] if isinstance(d, dict))
    return {_name(r): r.replace(" ", "") for r in pip_section if not r.startswith("-e")}


def test_environment_yml_pins_match_pyproject():
    assert _conda_pip_requirements() == _pyproject_requirements()


def test_environment_uses_python_311_and_installs_the_project():
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in environment["dependencies"]
    pip_section = next(d["pip"] for d in environment["dependencies"] if isinstance(d, dict))
    assert "-e ." in pip_section


def test_required_pins():
    requirements = _pyproject_requirements()
    assert requirements["torch"] == "torch==2.13.0"
    assert requirements["jupyter-book"] == "jupyter-book>=1.0.4.post1,<2"
    unpinned = [r for name, r in requirements.items() if "==" not in r and name != "jupyter-book"]
    assert unpinned == []


def test_ci_runs_the_readme_test_command_and_the_strict_book_build():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert "make test" in readme and "make book" in readme
    assert "make test" in ci and "make book" in ci
    assert "jupyter-book build . -W --keep-going --all" in makefile
    assert "--nbval" in makefile and "--dist loadfile" in makefile



def _make_in_copy(tmp_path, *args: str) -> str:
    """``make ARGS`` in a copy of the Makefile (and the files it reads) in ``tmp_path``,
    where no .venv exists: a dry run there cannot touch the project's environment."""
    import shutil
    import subprocess

    (tmp_path / "dprl").mkdir()
    shutil.copy(ROOT / "Makefile", tmp_path)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shutil.copy(ROOT / "dprl" / "floating_point.py", tmp_path / "dprl")
    done = subprocess.run(["make", "--no-print-directory", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout + done.stderr


def test_bare_make_lists_the_targets(tmp_path):
    out = _make_in_copy(tmp_path)
    assert "Nothing to be done" not in out
    assert all(f"  {target} " in out for target in ("book", "test", "check-book", "lab"))


def test_the_floating_point_settings_are_known_before_the_environment_exists(tmp_path):
    from dprl.floating_point import shell_assignments

    dry = _make_in_copy(tmp_path, "-n", "test")
    assert "python3.11 -m venv .venv" in dry
    assert f"env {shell_assignments()} .venv/bin/python -m pytest" in dry
