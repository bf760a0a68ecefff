"""Connections to the systems policyd reads and acts on, shared by the sources and the
actuators (which may not import each other). Each module loads its SDK only when imported."""
