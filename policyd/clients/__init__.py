"""What the sources, the actuators and the alerts share and may not take from each other (they
may not import each other): connections to the systems policyd reads and acts on
(`docker_engine`), the Kubernetes quantity format (`kubernetes_quantity`), the Kubernetes
list-then-watch loop (`kubernetes_follow`, which the daemon's policy resources use too), and
the building blocks of the settings models each of them owns a part of (`settings`). Each
module loads its SDK only when imported."""
