"""The publishing workflow (.github/workflows/), the launch buttons (_config.yml) and Binder's
environment (.binder/) agree with each other and with the project's own files.

The workflows are validated against GitHub's workflow schema (SchemaStore's, vendored by the
pinned check-jsonschema: no network), which is shown to reject broken ones; their steps are
checked against the README's two commands, .ci/run and the Makefile's Python."""

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted([*(ROOT / ".github" / "workflows").glob("*.yml"),
                    *(ROOT / ".github" / "workflows").glob("*.yaml")])
BOOK_WORKFLOW = ROOT / ".github" / "workflows" / "book.yml"
BINDER = ROOT / ".binder"
MAJOR_VERSION = re.compile(r"^[\w.-]+/[\w.-]+(?:/[\w./-]+)?@v\d+$")
GITHUB_REPOSITORY = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+$")
#: Workflows broken in ways the schema must catch: an edit of the real workflow's data, and
#: where in the workflow the schema then finds an error
BROKEN = {
    "no-runs-on": (lambda wf: wf["jobs"]["build"].pop("runs-on"), "$.jobs.build"),
    "misspelt-permission": (lambda wf: wf["jobs"]["deploy"]["permissions"].update(pages="writ"),
                            "$.jobs.deploy"),
    "step-with-uses-and-run": (lambda wf: wf["jobs"]["deploy"]["steps"][0].update(run="true"),
                               "$.jobs.deploy"),
    "unknown-trigger": (lambda wf: wf["on"].update(pushed={"branches": ["main"]}), "$.on"),
}


def _load_workflow(path: Path) -> dict:
    """A workflow as data; YAML 1.1 reads the key ``on`` as True (GitHub reads it as "on")."""
    data = yaml.safe_load(path.read_text())
    if True in data:
        data["on"] = data.pop(True)
    return data


@pytest.fixture(scope="module")
def validation(tmp_path_factory) -> dict:
    """check-jsonschema's verdicts (its JSON report) on the repository's workflows and on
    broken copies of the book's workflow, in one run of its command line."""
    broken_dir = tmp_path_factory.mktemp("broken-workflows")
    broken = {}
    for name, (edit, _) in BROKEN.items():
        workflow = _load_workflow(BOOK_WORKFLOW)
        edit(workflow)
        broken[name] = broken_dir / f"{name}.yml"
        broken[name].write_text(yaml.safe_dump(workflow, sort_keys=False))
    broken["not-yaml"] = broken_dir / "not-yaml.yml"
    broken["not-yaml"].write_text("on: [push\njobs: {\n")
    done = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
         "--output-format", "json", *map(str, WORKFLOWS), *map(str, broken.values())],
        capture_output=True, text=True, timeout=60)
    return {"returncode": done.returncode, "report": json.loads(done.stdout), "broken": broken}


def test_there_is_a_publishing_workflow():
    assert BOOK_WORKFLOW in WORKFLOWS


def test_every_workflow_matches_githubs_schema(validation):
    wrong = [e for e in validation["report"]["errors"] + validation["report"]["parse_errors"]
             if Path(e["filename"]).resolve() in {p.resolve() for p in WORKFLOWS}]
    assert wrong == []


@pytest.mark.parametrize("name", [*BROKEN, "not-yaml"])
def test_the_validator_rejects_a_broken_workflow(validation, name):
    assert validation["returncode"] != 0
    report = validation["report"]
    mine = validation["broken"][name].resolve()
    if name == "not-yaml":
        assert [Path(e["filename"]).resolve() for e in report["parse_errors"]] == [mine]
    else:  # rejected for what was broken
        paths = [e["path"] for e in report["errors"] if Path(e["filename"]).resolve() == mine]
        assert paths == [BROKEN[name][1]]


def _build_job() -> dict:
    return _load_workflow(BOOK_WORKFLOW)["jobs"]["build"]


def _make_commands(text: str) -> list[str]:
    return re.findall(r"^\s*(make [\w-]+)", text, re.MULTILINE)


def test_the_workflow_runs_the_readmes_two_commands_as_ci_does():
    readme = (ROOT / "README.md").read_text()
    two_commands = readme.split("## The two commands", 1)[1].split("```bash", 1)[1]
    two_commands = _make_commands(two_commands.split("```", 1)[0])
    assert sorted(two_commands) == ["make book", "make test"]
    runs = "\n".join(step.get("run", "") for step in _build_job()["steps"])
    ci = _make_commands((ROOT / ".ci" / "run").read_text())
    assert _make_commands(runs) == ci  # the same commands, in .ci/run's order
    assert set(two_commands) <= set(ci)


def test_the_workflow_uses_the_makefiles_python():
    makefile = (ROOT / "Makefile").read_text()
    version = re.search(r"^PYTHON_VERSION := (\S+)$", makefile, re.MULTILINE).group(1)
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == f">={version},<3.{int(version.split('.')[1]) + 1}"
    steps = _build_job()["steps"]
    setup = [s for s in steps if s.get("uses", "").startswith("actions/setup-python@")]
    assert len(setup) == 1 and str(setup[0]["with"]["python-version"]) == version
    # make gets that interpreter (it may not be the runner's python3.11 on the PATH)
    for step in steps:
        if _make_commands(step.get("run", "")):
            assert step["env"]["PYTHON"] == "${{ steps.%s.outputs.python-path }}" % setup[0]["id"]


def test_the_workflow_installs_the_pinned_torch_without_naming_a_version():
    venv_step = next(s for s in _build_job()["steps"] if "torch" in s.get("run", ""))
    assert "pyproject.toml" in venv_step["run"] and "--index-url" in venv_step["run"]
    assert re.findall(r"[\w\]]==\d", BOOK_WORKFLOW.read_text()) == []  # pyproject.toml pins


def test_the_workflow_deploys_the_built_book_to_pages():
    workflow = _load_workflow(BOOK_WORKFLOW)
    assert workflow["permissions"] == {"contents": "read"}
    uploads = [s for s in workflow["jobs"]["build"]["steps"]
               if s.get("uses", "").startswith("actions/upload-pages-artifact@")]
    assert [s["with"]["path"] for s in uploads] == ["_build/html"]
    assert "_build/html" in (ROOT / "README.md").read_text()  # where `make book` writes it
    deploy = workflow["jobs"]["deploy"]
    assert deploy["needs"] == "build"
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    assert [s["uses"].split("@")[0] for s in deploy["steps"]] == ["actions/deploy-pages"]
    assert deploy["environment"]["url"] == "${{ steps.%s.outputs.page_url }}" % deploy["steps"][0]["id"]
    # pull requests are checked, never deployed
    assert "pull_request" in workflow["on"]
    assert "github.event_name != 'pull_request'" in deploy["if"]
    # a deployment is never cancelled by the next push
    assert workflow["concurrency"]["cancel-in-progress"] in (
        False, "${{ github.event_name == 'pull_request' }}")


def test_actions_are_pinned_to_major_versions():
    for path in WORKFLOWS:
        for job in _load_workflow(path)["jobs"].values():
            for step in job.get("steps", []):
                if "uses" in step:
                    assert MAJOR_VERSION.match(step["uses"]), (path.name, step["uses"])


def _book_config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def test_the_repository_url_is_set_in_one_place():
    url = _book_config()["repository"]["url"]
    assert GITHUB_REPOSITORY.match(url)  # Binder's gh provider; the workflow compares it
    for path in WORKFLOWS:
        text = path.read_text()
        assert url not in text and "github.com/" not in text and "github.io" not in text
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff.get("repository-code", url) == url and cff.get("url", url) == url
    # the workflow's check reads that one setting
    check = next(s for s in _build_job()["steps"] if "_config.yml" in s.get("run", ""))
    assert '["repository"]["url"]' in check["run"]
    assert check["env"]["HERE"] == "${{ github.server_url }}/${{ github.repository }}"


def test_the_workflow_publishes_the_branch_the_launch_buttons_open():
    config = _book_config()["repository"]
    assert _load_workflow(BOOK_WORKFLOW)["on"]["push"]["branches"] == [config["branch"]]
    # path_to_book: chapters' launch links are <path_to_book><page>.ipynb from the root
    assert (ROOT / config["path_to_book"] / "_config.yml").is_file()


def test_launch_buttons_open_jupyterlab_on_binder():
    config = _book_config()
    assert config["launch_buttons"]["notebook_interface"] == "jupyterlab"
    assert config["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    assert config["html"]["use_repository_button"] is True


def test_jupyter_book_reads_the_configuration():
    from jupyter_book.config import get_final_config

    sphinx, _ = get_final_config(user_yaml=ROOT / "_config.yml", sourcedir=ROOT,
                                 cli_config={"latex_individualpages": False},
                                 raise_on_invalid=True)
    theme = sphinx["html_theme_options"]
    config = _book_config()
    assert theme["repository_url"] == config["repository"]["url"]
    assert theme["repository_branch"] == config["repository"]["branch"]
    assert theme["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    assert theme["use_repository_button"] is True


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ ]", requirement, maxsplit=1)[0].lower()


def test_binders_environment_pins_what_pyproject_pins():
    assert not (ROOT / "binder").exists()  # repo2docker reads one of binder/ and .binder/
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        pinned += extra
    environment = yaml.safe_load((BINDER / "environment.yml").read_text())
    assert "python=3.11" in environment["dependencies"]
    pip = next(d["pip"] for d in environment["dependencies"] if isinstance(d, dict))
    options = [line for line in pip if line.startswith("-")]
    assert options == ["--extra-index-url https://download.pytorch.org/whl/cpu"]
    requirements = [line.replace(" ", "") for line in pip if not line.startswith("-")]
    assert ({_name(r): r for r in requirements}
            == {_name(r): r.replace(" ", "") for r in pinned})
    # and so what the root's environment.yml pins (tests/test_packaging.py)
    root = yaml.safe_load((ROOT / "environment.yml").read_text())
    root_pip = next(d["pip"] for d in root["dependencies"] if isinstance(d, dict))
    assert sorted(requirements) == sorted(r.replace(" ", "") for r in root_pip if r != "-e .")


def test_binder_installs_the_project_editable():
    post_build = BINDER / "postBuild"
    assert os.access(post_build, os.X_OK)
    assert "pip install --no-deps -e ." in post_build.read_text()


def test_binders_kernels_get_the_pinned_floating_point():
    from dprl.floating_point import settings

    start = BINDER / "start"
    assert os.access(start, os.X_OK) and start.read_text().rstrip().endswith('exec "$@"')
    path = os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"])
    done = subprocess.run([str(start), "env"], env={"PATH": path}, cwd="/",
                          capture_output=True, text=True, timeout=30, check=True)
    exported = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert settings() and {name: exported.get(name) for name in settings()} == settings()


def test_binder_starts_unpinned_when_the_settings_cannot_be_read(tmp_path):
    # a copy whose floating_point.py is missing: the server still starts, unpinned, and says so
    (tmp_path / ".binder").mkdir()
    shutil.copy(BINDER / "start", tmp_path / ".binder" / "start")
    path = os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"])
    done = subprocess.run([str(tmp_path / ".binder" / "start"), "env"], env={"PATH": path},
                          capture_output=True, text=True, timeout=30, check=True)
    assert "run unpinned" in done.stderr and "OPENBLAS_NUM_THREADS" not in done.stdout
