"""Server runtime (gRPC servicer, sessions, transcript). Installed as ``secure_fedgraph.server``."""
