# Every target installs what it needs into .venv first, from scratch on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

KERAS_VENV ?= .venv-keras
KERAS_STAMP := $(KERAS_VENV)/.installed

.PHONY: doctor test test-wide integration-environments integration-keras integration-rllib matrix matrix-torch matrix-torch-outside fuzz-long fuzz-built-inside benchmark benchmark-real-clients clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test]' keras
	touch $(STAMP)

## The main job: what is covered here, and a live before/after graph-break check.
doctor: $(STAMP)
	$(BIN)/python -m dynamo_tree_compat

## The test suite, with the quick hypothesis profile, and the linter. The tests are
## independent: pytest-xdist runs them in WORKERS processes (2, the CI machine's cores),
## handing out two at a time, so that the long-running ones, first, go to both.
WORKERS ?= 2
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -q -n $(WORKERS) --maxschedchunk=2

## The repetitions make test leaves out: the tests marked `wide` (chains to the depth
## limit, a wider sample of optree's suite, a second start method...), with the ci profile.
## CI runs it after make test. Keras's wide fits run in the Keras environments instead.
test-wide: $(STAMP)
	DTC_FUZZ=ci $(BIN)/python -m pytest -q -n $(WORKERS) --maxschedchunk=2 -m wide \
		--ignore=tests/integration/test_keras_fit.py

## Keras 3.0.5 under torch.compile, in its own environment (it needs numpy<2): a model's
## forward, and fit/evaluate/predict with jit_compile=True, every model (DTC_FUZZ=ci runs
## the `wide` ones) but the fit with inductor (`slow`: Keras 3.15.1's run below has it).
## (Keras 3.11.3, the optree era, is in the project's environment: make test fits its
## sequential model.)
$(KERAS_STAMP): pyproject.toml constraints-keras.txt
	$(PYTHON) -m venv $(KERAS_VENV)
	$(KERAS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(KERAS_VENV)/bin/python -m pip install --quiet -c constraints-keras.txt -e . \
		keras numpy packaging dm-tree attrs wrapt hypothesis pytest pytest-xdist
	touch $(KERAS_STAMP)

## Keras 3.15.1 (keras.tree over torch's pytree) with torch 2.13.0, in its own environment:
## Keras's own tree_test.py compiled, the models' graph budget, and fit/evaluate/predict
## with jit_compile=True (tests/integration/test_keras_fit.py). Every keras.tree function
## compiled (tests/keras) runs on Keras 3.15.1 in the torch matrix (2.15.0), and on
## Keras 3.11.3 in make test.
KERAS_NEW_VENV ?= .venv-keras-new
KERAS_NEW_STAMP := $(KERAS_NEW_VENV)/.installed
$(KERAS_NEW_STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(KERAS_NEW_VENV)
	$(KERAS_NEW_VENV)/bin/python -m pip install --quiet --upgrade pip
	grep -v -e '^keras' -e '^dm-tree' constraints.txt > $(KERAS_NEW_VENV)/constraints.txt
	$(KERAS_NEW_VENV)/bin/python -m pip install --quiet -c $(KERAS_NEW_VENV)/constraints.txt \
		-e . keras==3.15.1 attrs wrapt numpy absl-py hypothesis pytest pytest-xdist
	touch $(KERAS_NEW_STAMP)

integration-keras: $(KERAS_STAMP) $(KERAS_NEW_STAMP)
	DTC_FUZZ=ci $(KERAS_VENV)/bin/python -m pytest -q -s -o addopts= -p no:cacheprovider \
		-n $(WORKERS) --maxschedchunk=2 -m "not slow" tests/integration/test_keras.py \
		tests/integration/test_graph_budget.py \
		tests/integration/test_keras_fit.py
	DTC_FUZZ=ci $(KERAS_NEW_VENV)/bin/python -m pytest -q -s -p no:cacheprovider -n $(WORKERS) \
		--maxschedchunk=2 tests/suites/test_keras_suite.py \
		tests/integration/test_graph_budget.py tests/integration/test_keras_fit.py

## Real RLlib (ray[rllib] 2.60.0) under torch.compile, in its own environment: a PPO
## learner built by RLlib, its training step compiled (tests/integration/test_rllib.py).
## Its tests are independent (each builds its own learner; those that start Ray start
## their own local cluster), WORKERS at a time.
RLLIB_VENV ?= .venv-rllib
RLLIB_STAMP := $(RLLIB_VENV)/.installed
$(RLLIB_STAMP): pyproject.toml constraints-rllib.txt
	$(PYTHON) -m venv $(RLLIB_VENV)
	$(RLLIB_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(RLLIB_VENV)/bin/python -m pip install --quiet -c constraints-rllib.txt -e . \
		'ray[rllib]' pytest pytest-xdist hypothesis
	touch $(RLLIB_STAMP)

## The integration and matrix environments alone (CI builds them while make test runs).
integration-environments: $(KERAS_STAMP) $(KERAS_NEW_STAMP) $(RLLIB_STAMP) $(MATRIX_STAMP)

integration-rllib: $(RLLIB_STAMP)
	$(RLLIB_VENV)/bin/python -m pytest -q -s -o addopts= -n $(WORKERS) --maxschedchunk=1 \
		tests/integration/test_rllib.py

## The version matrix: one environment without dm-tree and optree, then with dm-tree only,
## then with the oldest optree supported, where the optree suites run, then optree only.
MATRIX_VENV ?= .venv-matrix
MATRIX_STAMP := $(MATRIX_VENV)/.installed
MATRIX_TEST := $(MATRIX_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/matrix
$(MATRIX_STAMP): pyproject.toml constraints.txt
	rm -rf $(MATRIX_VENV)
	$(PYTHON) -m venv $(MATRIX_VENV)
	$(MATRIX_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(MATRIX_VENV)/bin/python -m pip install --quiet -c constraints.txt -e . pytest hypothesis \
		pytest-xdist
	touch $(MATRIX_STAMP)

matrix: $(MATRIX_STAMP)
	$(MATRIX_VENV)/bin/python -m pip uninstall --quiet --yes dm-tree optree attrs wrapt numpy
	DTC_MATRIX=1 DTC_MISSING=tree,optree $(MATRIX_TEST)
	$(MATRIX_VENV)/bin/python -m pip install --quiet -c constraints.txt dm-tree
	DTC_MATRIX=1 DTC_MISSING=optree $(MATRIX_TEST)
	grep -v '^optree' constraints.txt > $(MATRIX_VENV)/constraints-oldest-optree.txt
	$(MATRIX_VENV)/bin/python -m pip install --quiet -c $(MATRIX_VENV)/constraints-oldest-optree.txt \
		optree==0.13.0 attrs wrapt numpy
	$(MATRIX_VENV)/bin/python -m pytest -q -p no:cacheprovider -n $(WORKERS) --maxschedchunk=2 \
		tests/optree
	$(MATRIX_VENV)/bin/python -m pip uninstall --quiet --yes dm-tree
	DTC_MATRIX=1 DTC_MISSING=tree $(MATRIX_TEST)

## The torch matrix: every torch from 2.5 to 2.15, one environment at a time (each about
## 5 GB, built, tested, removed). TORCH="2.5.1 2.15.0" picks versions; VERSION@PYTHON
## builds that one with another Python (TORCH="2.15.0@3.13 2.5.1@3.10"), else PYTHON.
TORCH ?=
matrix-torch:
	MATRIX_TORCH_WORKERS=$(WORKERS) .ci/matrix-torch $(TORCH)

## A torch outside the supported releases, as users get it there: one warning, nothing
## done, nothing broken (tests/outside). By default 2.4.1, the release before the oldest
## supported; TORCH="..." picks others.
matrix-torch-outside:
	MATRIX_TORCH_OUTSIDE=1 .ci/matrix-torch $(or $(TORCH),2.4.1)

## The long fuzz profile (opt-in): 100,000 structures per eager test, 2,000 per compiled
## function. SEED=<n> reproduces a run; the seed is printed first.
SEED ?= $(shell date +%s)
SEED := $(SEED)
LONG_FUZZ = DTC_FUZZ=long $(BIN)/python -m pytest -q -p no:cacheprovider \
	--hypothesis-seed=$(SEED) --hypothesis-show-statistics
fuzz-long: $(STAMP)
	@echo "fuzz-long: --hypothesis-seed=$(SEED)"
	$(LONG_FUZZ) tests/dmtree/test_dmtree_parity.py \
		tests/dmtree/test_dmtree_compile.py tests/optree/test_optree_fast_path.py \
		tests/optree/test_optree_compile.py tests/optree/test_optree_twins.py

## The built-inside fuzz in the long profile (opt-in, 7 to 15 hours on one core for the
## full 2,000): structures built inside the compiled function, chains of every kind up to
## the depth limit, every dm-tree function on each. EXAMPLES=<n> draws fewer; SEED=<n>.
EXAMPLES ?= 2000
fuzz-built-inside: $(STAMP)
	@echo "fuzz-built-inside: --hypothesis-seed=$(SEED)"
	DTC_COMPILED_EXAMPLES=$(EXAMPLES) $(LONG_FUZZ) \
		tests/dmtree/test_dmtree_built_inside.py

## Real clients with inductor, package off and on: RLlib's learner update and Keras's fit
## (benchmarks/real_clients.py), then where RLlib's compile time goes (rllib_compile_split.py),
## in the RLlib environment with Keras 3.11.3 added.
benchmark-real-clients: $(RLLIB_STAMP)
	$(RLLIB_VENV)/bin/python -m pip install --quiet -c constraints.txt keras
	$(RLLIB_VENV)/bin/python benchmarks/real_clients.py
	$(RLLIB_VENV)/bin/python benchmarks/rllib_compile_split.py

benchmark: $(STAMP)
	$(BIN)/python -m pip install --quiet matplotlib
	$(BIN)/python benchmarks/compile_time.py

clean:
	rm -rf $(VENV) $(KERAS_VENV) $(KERAS_NEW_VENV) $(RLLIB_VENV) $(MATRIX_VENV) .venv-torch .pytest_cache .hypothesis .ruff_cache *.egg-info
