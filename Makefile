# The two set-up commands of the README, and the protobuf regeneration.
#   make demo    create .venv, install secure-fedgraph, run the demo
#   make test    create .venv, install secure-fedgraph with its test tools, run the tests
#   make protos  regenerate secure_fedgraph/wire/ from proto/ (tests/test_protos.py checks it)
#   make bench   the benchmarks: secure sums in one process, then FedAvg rounds over gRPC
#   make fuzz    fuzz a real server with honest clients running (at least 10,000 messages; counts by outcome)
#   make mutate  mutation testing of the security checks with mutmut: kill rate per module, survivors listed (about an hour and a quarter)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test protos bench fuzz mutate clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/secure-fedgraph demo

test: $(VENV)/.installed
	$(BIN)/python -m pytest -n 2 --dist loadfile

protos: $(VENV)/.installed
	cd proto && ../$(BIN)/python -m grpc_tools.protoc -I. --python_out=.. --pyi_out=.. $$(find . -name '*.proto' | sort)

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/secure_sum.py
	$(BIN)/python benchmarks/fedavg_round.py

fuzz: $(VENV)/.installed
	$(BIN)/python -m tests.fuzzing --messages 10000

mutate: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e ".[mutate]"
	$(BIN)/python -m tests.mutation

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
