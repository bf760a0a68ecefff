"""Who is training: the identity labels carried by every series the exporter exposes.

Owns the label names (`job_name`, `namespace`, `pod`, `container`) and the one place that knows
which environment variables fill them. It reads only the mapping it is given
(`Identity.from_env(os.environ)` in a program's `main`), never `os.environ` itself.

`job_name`, not `job`: Prometheus gives every scraped series a `job` label of its own (the scrape
job), which would overwrite or rename ours.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

JOB_NAME_ENV = "POLICYD_JOB_NAME"
"""The training job's name when it is not passed in."""
CONTAINER_ENV = "POLICYD_CONTAINER"
"""Docker: the container's name or id, when the hostname is not it (host networking, --hostname)."""
IN_KUBERNETES_ENV = "KUBERNETES_SERVICE_HOST"
"""Set by the kubelet in every pod: tells Kubernetes from Docker."""


@dataclass(frozen=True, kw_only=True)
class Identity:
    """The identity labels of one training job's series; None means unknown (label left out).

    Label values are plain strings; an empty string is refused because Prometheus treats an empty
    label as an absent one, which would make two different identities look the same.
    """

    job_name: str
    namespace: str | None = None
    pod: str | None = None
    container: str | None = None

    def __post_init__(self) -> None:
        if not self.job_name:
            raise ValueError("job_name must be a non-empty string")
        for name in ("namespace", "pod", "container"):
            if getattr(self, name) == "":
                raise ValueError(f"{name} must be None (unknown) or a non-empty string")

    def labels(self) -> dict[str, str]:
        """The label set, in a fixed order, leaving out what is unknown."""
        pairs = {
            "job_name": self.job_name,
            "namespace": self.namespace,
            "pod": self.pod,
            "container": self.container,
        }
        return {k: v for k, v in pairs.items() if v is not None}

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str],
        *,
        job_name: str | None = None,
        container: str | None = None,
    ) -> Identity:
        """Read the identity from an environment mapping; explicit arguments win.

        * job_name: the argument, else POLICYD_JOB_NAME (required: ValueError naming both).
        * Kubernetes (KUBERNETES_SERVICE_HOST is set): namespace = POD_NAMESPACE,
          pod = POD_NAME (else HOSTNAME, which the kubelet sets to the pod's name),
          container = CONTAINER_NAME (else POLICYD_CONTAINER).
        * Otherwise (Docker, or a bare process): container = POLICYD_CONTAINER, else HOSTNAME
          (Docker sets it to the short container id unless --hostname or --network host is used;
          a bare shell does not export it, so a bare process gets no container label).
        """
        name = job_name or environ.get(JOB_NAME_ENV) or None
        if name is None:
            raise ValueError(f"job_name: pass job_name= or set {JOB_NAME_ENV} in the environment")

        def get(key: str) -> str | None:
            return environ.get(key) or None

        if get(IN_KUBERNETES_ENV) is not None:
            return cls(
                job_name=name,
                namespace=get("POD_NAMESPACE"),
                pod=get("POD_NAME") or get("HOSTNAME"),
                container=container or get("CONTAINER_NAME") or get(CONTAINER_ENV),
            )
        return cls(
            job_name=name,
            container=container or get(CONTAINER_ENV) or get("HOSTNAME"),
        )
