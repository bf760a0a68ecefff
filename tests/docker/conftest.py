"""Fixtures for the Docker tests: real engines (slow tests) are started once for this package's
tests and stopped after its last one (package scope: nothing of theirs goes on running, or
talking to an engine through requests, under the later tests' mocked HTTP)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.docker_engines import Engine, build_trainer_image, docker_engines


@pytest.fixture(scope="package")
def engines() -> Iterator[list[Engine]]:
    """Two engines, e1 and e2; the trainer image is built on e1 only (a migration copies it)."""
    with docker_engines(2) as started:
        build_trainer_image(started[0])
        yield started
