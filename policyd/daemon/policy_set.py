"""Policy files and policy custom resources as one set, for the daemon's hot reload.

`PolicySources` has the interface of `reload.PolicyWatcher` (`poll()` -> a `Reload` when
something changed), over both: the files keep their rule (a broken file keeps the last good
files, every problem reported), each resource its own (`policy_resources`: an invalid
generation keeps its last good one, and says why in its status). A change of either gives the
whole set to run: the last good files plus the good resources (with the files' problems while
they stand, so /readyz keeps saying the files are broken). A resource whose name a file
already uses is refused (its status says which file); resources are judged again whenever the
files change.
"""

from __future__ import annotations

from collections.abc import Sequence

from policyd.daemon.policy_resources import PolicyResources
from policyd.daemon.reload import PolicyWatcher, Reload
from policyd.engine.spec import PolicyDocument
from policyd.policy import Problem, validate_files


class PolicySources:
    """Files (`files`, whose valid policies at start are `loaded`) and `resources`."""

    def __init__(self, files: PolicyWatcher, resources: PolicyResources,
                 loaded: Sequence[PolicyDocument]) -> None:
        self.files, self.resources = files, resources
        self._file_policies = tuple(loaded)
        self._where = self._names()
        self._file_problems: tuple[Problem, ...] = ()
        resources.taken = self.file_using

    def _names(self) -> dict[str, str]:
        """Policy name -> the file defining it (files checked one by one)."""
        return {policy.name: str(path) for path in self.files.paths
                for policy in validate_files([path])[0]}

    def file_using(self, name: str) -> str | None:
        """The policy file that defines `name` (None: no file does)."""
        return self._where.get(name)

    def policies(self) -> tuple[PolicyDocument, ...]:
        """What runs now: the last good files, then the good resources."""
        return (*self._file_policies, *self.resources.current())

    def poll(self) -> Reload | None:
        found = self.files.poll()
        if found is not None:
            if found.ok:
                self._file_policies = found.policies
                self._where = self._names()
            self._file_problems = found.problems
            self.resources.rejudge()
        changed = self.resources.take()
        if found is None and changed is None:
            return None
        return Reload(policies=self.policies(), problems=self._file_problems)
