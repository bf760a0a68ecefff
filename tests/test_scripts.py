"""scripts/run and scripts/test as a newcomer calls them: every argument reaches policyd (or
pytest), and the venv is installed once.

The scripts run for real (bash, subprocess) in a copy of the repository's scripts/ beside
throw-away pyproject files; the interpreter and the venv's programs are fakes that log their
arguments, so no test touches a package registry.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"

# A fake interpreter: `-m venv DIR` makes a fake venv whose python logs pip installs and whose
# programs (policyd, ruff, mypy, lint-imports, pytest) log and print their arguments, each in
# brackets so that a test sees where one ends: `pytest [-k] [not slow]`.
FAKE_PYTHON = textwrap.dedent("""\
    #!/usr/bin/env bash
    set -eu
    [ "$1 $2" = "-m venv" ] || { echo "fake python: unexpected $*" >&2; exit 9; }
    mkdir -p "$3/bin"
    cat > "$3/bin/python" <<'PY'
    #!/usr/bin/env bash
    echo "$*" >> "$(dirname "$0")/../pip.log"
    PY
    cat > "$3/bin/policyd" <<'TOOL'
    #!/usr/bin/env bash
    { printf %s "$(basename "$0")"; for a in "$@"; do printf ' [%s]' "$a"; done; echo; } \\
      | tee -a "$(dirname "$0")/../calls.log"
    TOOL
    for tool in ruff mypy lint-imports pytest; do cp "$3/bin/policyd" "$3/bin/$tool"; done
    chmod +x "$3"/bin/*
    """)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with the real scripts and empty project metadata."""
    root = tmp_path / "repo"
    shutil.copytree(SCRIPTS, root / "scripts")
    (root / "exporters").mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'policyd'\n")
    (root / "exporters" / "pyproject.toml").write_text("[project]\nname = 'exporters'\n")
    python = tmp_path / "python3"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    return root


def call(repo: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "PYTHON": str(repo.parent / "python3"),
           "POLICYD_VENV": str(repo / ".venv")}
    return subprocess.run(["bash", str(repo / "scripts" / script), *args], env=env,
                          cwd=repo.parent, capture_output=True, text=True, timeout=60,
                          check=False)


def pip_calls(repo: Path) -> list[str]:
    log = repo / ".venv" / "pip.log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize("args", [
    pytest.param(["--help"], id="--help"),
    pytest.param(["-h"], id="-h"),
    pytest.param(["simulate", "--scenario", "flowcon-fixed-3"], id="a-subcommand"),
    pytest.param(["plan", "--policy", "my policy.yaml"], id="spaces-kept"),
])
def test_run_passes_every_argument_to_policyd(repo: Path, args: list[str]) -> None:
    done = call(repo, "run", *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"policyd{''.join(f' [{a}]' for a in args)}\n"
    (install,) = pip_calls(repo)
    assert install == f"-m pip install --quiet --disable-pip-version-check -e {repo} " \
                      f"-e {repo}/exporters"


def test_run_without_arguments_simulates(repo: Path) -> None:
    assert call(repo, "run").stdout == "policyd [simulate]\n"


def test_run_installs_once_whatever_the_subcommand(repo: Path) -> None:
    for args in (["simulate"], ["validate", "p.yaml"], ["--help"], ["plan"]):
        assert call(repo, "run", *args).returncode == 0
    assert len(pip_calls(repo)) == 1


def test_run_reads_paths_from_the_callers_directory(repo: Path, tmp_path: Path) -> None:
    call(repo, "run")  # makes the fake venv; now its policyd says where it runs
    (repo / ".venv" / "bin" / "policyd").write_text("#!/usr/bin/env bash\npwd\n")
    done = subprocess.run(["bash", str(repo / "scripts" / "run"), "validate"], cwd=tmp_path,
                          capture_output=True,
                          text=True, timeout=60, check=True,
                          env={"PATH": os.environ["PATH"], "POLICYD_VENV": str(repo / ".venv")})
    assert done.stdout == f"{tmp_path}\n"


def test_the_test_extra_serves_run_too_and_a_reinstall_keeps_it(repo: Path) -> None:
    assert call(repo, "test", "--quick").returncode == 0
    assert call(repo, "run", "simulate").returncode == 0
    assert [c.split(" -e ")[1] for c in pip_calls(repo)] == [f"{repo}[test]"]
    stamp = repo / ".venv" / ".policyd-installed"
    os.utime(stamp, (1, 1))  # the project's metadata is now newer than the install
    assert call(repo, "run").returncode == 0
    assert [c.split(" -e ")[1] for c in pip_calls(repo)] == [f"{repo}[test]"] * 2


def test_run_then_test_installs_the_test_extra(repo: Path) -> None:
    call(repo, "run")
    call(repo, "test", "--quick")
    call(repo, "test", "--quick")
    assert [c.split(" -e ")[1] for c in pip_calls(repo)] == [str(repo), f"{repo}[test]"]


def test_test_passes_its_arguments_to_pytest_not_to_pip(repo: Path) -> None:
    done = call(repo, "test", "--quick", "-x", "-k", "not promtool", "--", "-q", "tests/sim")
    assert done.returncode == 0, done.stderr
    log = (repo / ".venv" / "calls.log").read_text().splitlines()
    assert log == ["ruff [check] [policyd] [tests] [benchmarks] [tools] [exporters]",
                   "mypy [policyd] [exporters/policyd_exporters]", "lint-imports",
                   "pytest [-m] [not slow] [-x] [-k] [not promtool] [-q] [tests/sim]"]
    assert [c.split(" -e ")[1] for c in pip_calls(repo)] == [f"{repo}[test]"]


def test_test_help_prints_its_usage_and_installs_nothing(repo: Path) -> None:
    done = call(repo, "test", "--help")
    assert done.returncode == 0
    assert "scripts/test --quick" in done.stdout and "needs root" in done.stdout
    assert not (repo / ".venv").exists()
