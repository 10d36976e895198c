"""`synthrelease run` / `stage release` warn when dvc.lock, which records the md5 and size of the validated table and
the other private artefacts, is tracked by git in a repository with a git remote that is not steward-internal."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from flows.cli import INTERNAL_REMOTES, lock_leak_warning, main

SHARED = "https://git.example.org/bank/synthrelease.git"
INTERNAL = "ssh://steward@vault.bank.internal/srv/git/synthrelease.git"
LOCK = "schema: '2.0'\nstages:\n  prepare:\n    outs:\n    - path: data/prepared/breast_cancer\n      md5: 0123.dir\n"


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True, capture_output=True
    )


def repository(tmp_path: Path, remotes: dict[str, str], commit_lock: bool = True) -> Path:
    """A scratch git repository with dvc.lock (committed, or left untracked) and the given remotes."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / "dvc.lock").write_text(LOCK)
    (root / "README").write_text("steward\n")
    git(root, "add", "README", *(["dvc.lock"] if commit_lock else []))
    git(root, "commit", "-qm", "init")
    for name, url in remotes.items():
        git(root, "remote", "add", name, url)
    return root


def test_a_tracked_lock_with_a_shared_remote_warns_what_leaks_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.delenv(INTERNAL_REMOTES, raising=False)
    root = repository(tmp_path, {"origin": SHARED})
    warning = lock_leak_warning(root)
    assert warning is not None and warning.startswith("warning: dvc.lock is tracked by git")
    assert "(origin)" in warning and SHARED not in warning  # the remote's name: its URL may carry a credential
    assert "md5 and byte size of the validated table" in warning and "Only releases/ may leave" in warning
    assert f"list their URLs in {INTERNAL_REMOTES}" in warning and "git remote remove" in warning
    monkeypatch.setenv(INTERNAL_REMOTES, INTERNAL)  # another remote is internal, not this one
    assert lock_leak_warning(root) is not None


@pytest.mark.parametrize(
    "remotes, listed, commit_lock",
    [
        ({}, "", True),  # no remote: nothing leaves the machine
        ({"vault": INTERNAL}, INTERNAL, True),  # the steward-internal remote
        ({"vault": INTERNAL, "backup": SHARED}, f"{INTERNAL}, {SHARED}/", True),  # both listed (a trailing / alike)
        ({"origin": SHARED}, "", False),  # dvc.lock untracked
    ],
)
def test_no_warning_without_a_tracked_lock_and_a_shared_remote(tmp_path, monkeypatch, remotes, listed, commit_lock):
    monkeypatch.setenv(INTERNAL_REMOTES, listed)
    assert lock_leak_warning(repository(tmp_path, remotes, commit_lock)) is None


def test_outside_a_git_repository_there_is_no_warning(tmp_path, monkeypatch):
    monkeypatch.delenv(INTERNAL_REMOTES, raising=False)
    (tmp_path / "dvc.lock").write_text(LOCK)
    assert lock_leak_warning(tmp_path) is None


def test_stage_release_and_run_warn_once_other_commands_not(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(INTERNAL_REMOTES, raising=False)
    monkeypatch.chdir(repository(tmp_path, {"origin": SHARED}))
    for argv, warned in ((["stage", "release"], 1), (["run"], 1), (["stage", "validate"], 0), (["ledger", "show"], 0)):
        assert main(["--params", "missing.yaml", *argv]) == 2  # the configuration error after the warning
        err = capsys.readouterr().err
        assert err.count("warning: dvc.lock is tracked by git") == warned, (argv, err)
        assert "missing.yaml: the release configuration is missing" in err
