# One setting = DATASET x GOLD x SEED under a PROFILE (configs/profiles/*.yaml).
#   make setup && make test && make demo
#   make run METHOD=aclm DATASET=multiconer/en GOLD=100 SEED=1 PROFILE=tiny
# Extra config overrides go in ARGS, e.g. ARGS="ner.epochs=5 keywords.p=0.4".

VENV    ?= .venv
PYTHON  ?= $(VENV)/bin/python
TORCH   ?= torch==2.13.0
PROFILE ?= paper
DATASET ?= multiconer/en
GOLD    ?= 100
SEED    ?= 1
METHOD  ?= aclm
ARGS    ?=
SETTING  = profile=$(PROFILE) dataset=$(DATASET) gold=$(GOLD) seed=$(SEED) $(ARGS)
TINY     = models/tiny/manifest.json

.PHONY: setup test demo tiny-models splits gold aclm run bench clean

setup:  ## create .venv with the pinned requirements (torch first: set TORCH_INDEX for a CUDA/CPU index)
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --upgrade pip
	$(VENV)/bin/pip install $(TORCH) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(VENV)/bin/pip install -r requirements.txt
	$(VENV)/bin/pip install --no-deps -e .

$(TINY):
	$(PYTHON) scripts/build_tiny_models.py --out models/tiny

tiny-models: $(TINY)  ## small random-weight models of the paper's architectures (offline)

test:  ## the test suite (offline; integration tests read ACLM_DATA_DIR or ../shared/data when present)
	$(PYTHON) -m pytest

demo: $(TINY)  ## Gold-only vs ACLM on the bundled sample with the tiny models, on CPU
	$(PYTHON) scripts/demo.py

splits:  ## stratified low-resource samples of DATASET into splits/DATASET
	$(PYTHON) scripts/make_splits.py dataset=$(DATASET) seed=$(SEED) $(ARGS) --out splits/$(DATASET)/seed$(SEED)

gold:  ## S0 + S1: the gold sample and the Gold-only model, evaluated
	$(PYTHON) scripts/train_ner.py $(SETTING)

aclm:  ## the whole ACLM pipeline (S1-S7) for one setting
	$(PYTHON) scripts/run_method.py method=aclm $(SETTING)

run:  ## any method (gold_only aclm aclm_random aclm_only_entity lwtr daga mulda melm wikineural)
	$(PYTHON) scripts/run_method.py method=$(METHOD) $(SETTING)

bench: $(TINY)  ## throughput of each stage with the tiny models on this machine
	$(PYTHON) scripts/benchmark.py

clean:
	rm -rf runs models/tiny
