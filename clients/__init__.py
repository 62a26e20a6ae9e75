"""Client runtime (gRPC client hosting many logical clients). Installed as ``secure_fedgraph.clients``."""
