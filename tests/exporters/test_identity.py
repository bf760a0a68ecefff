"""Identity labels from an explicit environment mapping."""

from __future__ import annotations

import pytest
from policyd_exporters import Identity

K8S = {
    "KUBERNETES_SERVICE_HOST": "10.0.0.1",
    "POD_NAMESPACE": "ml",
    "POD_NAME": "vae-1-abcde",
    "CONTAINER_NAME": "trainer",
    "HOSTNAME": "vae-1-abcde",
    "POLICYD_JOB_NAME": "vae-1",
}


@pytest.mark.parametrize(
    ("environ", "kwargs", "labels"),
    [
        pytest.param(
            K8S, {},
            {"job_name": "vae-1", "namespace": "ml", "pod": "vae-1-abcde", "container": "trainer"},
            id="kubernetes-downward-api",
        ),
        pytest.param(
            {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "HOSTNAME": "p-1"}, {"job_name": "j"},
            {"job_name": "j", "pod": "p-1"},
            id="kubernetes-without-downward-api",
        ),
        pytest.param(
            {"HOSTNAME": "3f2a9c1b7d4e", "POLICYD_JOB_NAME": "vae-1"}, {},
            {"job_name": "vae-1", "container": "3f2a9c1b7d4e"},
            id="docker-hostname-is-short-id",
        ),
        pytest.param(
            {"HOSTNAME": "host-a", "POLICYD_CONTAINER": "vae-1-c", "POLICYD_JOB_NAME": "vae-1"},
            {}, {"job_name": "vae-1", "container": "vae-1-c"},
            id="docker-env-wins-over-hostname",
        ),
        pytest.param(
            {"POLICYD_JOB_NAME": "env-name", "HOSTNAME": "h"},
            {"job_name": "arg-name", "container": "arg-c"},
            {"job_name": "arg-name", "container": "arg-c"},
            id="arguments-win",
        ),
        pytest.param({}, {"job_name": "j"}, {"job_name": "j"}, id="bare-process"),
    ],
)
def test_from_env(environ: dict[str, str], kwargs: dict[str, str], labels: dict[str, str]) -> None:
    assert Identity.from_env(environ, **kwargs).labels() == labels


def test_job_name_is_required_and_the_error_says_how() -> None:
    with pytest.raises(ValueError, match="POLICYD_JOB_NAME"):
        Identity.from_env({"HOSTNAME": "h"})


def test_empty_label_values_are_refused() -> None:
    with pytest.raises(ValueError, match="pod"):
        Identity(job_name="j", pod="")
