"""Generated protobuf modules (from proto/). Never edit by hand: run `make protos`."""
