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
MINI_GEN = models/mini/manifest.json
PAPER_SHAPE = models/paper_shape/manifest.json
DATA_ENV = ACLM_DATA_DIR=$${ACLM_DATA_DIR:-$(abspath ../shared/data)}
# the mini profile's generator is pretrained here (make mini-generator): runs of that profile need it first
PROFILE_MODELS = $(if $(filter mini,$(PROFILE)),$(MINI_GEN)) $(if $(filter paper_shape,$(PROFILE)),$(PAPER_SHAPE))

.PHONY: FORCE setup test demo tiny-models mini-generator paper-shape-models splits gold aclm run bench bench-paper-shape clean

setup:  ## create .venv with the pinned requirements (torch first: set TORCH_INDEX for a CUDA/CPU index)
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --upgrade pip
	$(VENV)/bin/pip install $(TORCH) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(VENV)/bin/pip install -r requirements.txt
	$(VENV)/bin/pip install --no-deps -e .

$(TINY):
	$(PYTHON) scripts/build_tiny_models.py --out models/tiny

tiny-models: $(TINY)  ## small random-weight models of the paper's architectures (offline)

# always asked: the script itself rebuilds only when the spec, the seed or the text changed
$(MINI_GEN): FORCE
	$(DATA_ENV) $(PYTHON) scripts/pretrain_generator.py --out models/mini

# the tokenizers learn from MultiCoNER en's train text where it is there (realistic sequence lengths)
$(PAPER_SHAPE):
	text=$${ACLM_DATA_DIR:-$(abspath ../shared/data)}/multiconer/en/train_full.conll; \
	$(PYTHON) scripts/build_tiny_models.py --shape paper $$([ -f $$text ] && echo --text $$text)

paper-shape-models: $(PAPER_SHAPE)  ## random-weight models of the paper's sizes (6.9 GB, about 1 min)

mini-generator: $(MINI_GEN)  ## a small mBART-50 pretrained with mBART's denoising on WikiNEuRal en text (~15 min, 2 cores)

test:  ## the test suite (offline; integration tests read ACLM_DATA_DIR or ../shared/data when present)
	$(PYTHON) -m pytest

demo: $(TINY) $(MINI_GEN)  ## Gold-only vs ACLM with the real mini encoder on multiconer/en 100 (CPU, ~6 min)
	ACLM_DATA_DIR=$${ACLM_DATA_DIR:-$(abspath ../shared/data)} $(PYTHON) scripts/demo.py

splits:  ## stratified low-resource samples of DATASET into splits/DATASET
	$(PYTHON) scripts/make_splits.py dataset=$(DATASET) splits.seed=$(SEED) $(ARGS) --out splits/$(DATASET)/seed$(SEED)

gold:  ## S0 + S1: the gold sample and the Gold-only model, evaluated
	$(PYTHON) scripts/train_ner.py $(SETTING)

aclm: $(PROFILE_MODELS)  ## the whole ACLM pipeline (S1-S7) for one setting
	$(PYTHON) scripts/run_method.py method=aclm $(SETTING)

run: $(PROFILE_MODELS)  ## any method (gold_only aclm aclm_random aclm_only_entity lwtr daga mulda melm wikineural)
	$(PYTHON) scripts/run_method.py method=$(METHOD) $(SETTING)

bench: $(TINY)  ## throughput of S2/S3/retrieval/generation, and the released code's approach beside ours
	OMP_NUM_THREADS=1 $(PYTHON) scripts/benchmark.py

bench-paper-shape: $(PAPER_SHAPE)  ## one ACLM setting at paper size: time, memory, bytes per stage; Table 1 estimate
	$(DATA_ENV) $(PYTHON) scripts/stage_costs.py $(ARGS)

clean:
	rm -rf runs models/tiny models/paper_shape

# --- Paper tables (configs/grids/<table>.yaml) ---------------------------------------------
#   make reproduce-table1 PROFILE=paper -j 4            all of Table 1, then the table
#   make reproduce-table1 LANGS=en SIZES=100,200 METHODS=gold_only,aclm SEEDS=1,2
#   make reproduce-melm_table1 ... ; make aggregate-table3 (the table only, no runs)
# Each run is a file target (its result.json); methods wait for their setting's S1, so -j
# never trains one S1 twice. -k keeps going past a failed run, which leaves failed.json and
# shows as FAILED in the table; make exits non-zero after printing the table.
# Several GPUs: one make per GPU on disjoint LANGS or SEEDS slices (not METHODS: the methods
# of a setting share S1), each slice gets its own fragment:
#   CUDA_VISIBLE_DEVICES=0 make reproduce-table1 LANGS=en,bn,hi,de,es &
#   CUDA_VISIBLE_DEVICES=1 make reproduce-table1 LANGS=ko,nl,ru,tr,zh &
# GNU parallel / Slurm job arrays: `scripts/grid.py list TABLE --phase N` (see aclm/grid.py).
LANGS   ?=
SIZES   ?=
METHODS ?=
SEEDS   ?=
RUNS    ?= runs
RESULTS ?= results
GRID_ARGS = --profile $(PROFILE) --runs $(RUNS) $(if $(LANGS),--langs $(LANGS)) \
            $(if $(SIZES),--sizes $(SIZES)) $(if $(METHODS),--methods $(METHODS)) $(if $(SEEDS),--seeds $(SEEDS))

define reproduce_grid
	+@frag=$$($(PYTHON) scripts/grid.py makefile $(1) $(GRID_ARGS) --python $(PYTHON)) || exit 1; \
	$(MAKE) -k -f $$frag all; status=$$?; \
	$(PYTHON) scripts/aggregate.py $(1) $(GRID_ARGS) --out $(RESULTS) || status=1; \
	exit $$status
endef

reproduce-table%:  ## run a paper table's grid (make -j N passes through), then print the table
	$(call reproduce_grid,table$*)

reproduce-melm_table%:  ## the same for MELM's CoNLL tables
	$(call reproduce_grid,melm_table$*)

reproduce-mini_table%: $(PROFILE_MODELS)  ## a CPU-sized miniature (configs/grids/mini_table1.yaml, PROFILE=mini)
	$(call reproduce_grid,mini_table$*)

prune-table%:  ## delete the S1 weights of the table's finished settings (a later run retrains S1)
	$(PYTHON) scripts/grid.py prune table$* $(GRID_ARGS)

aggregate-table%:  ## print and write a table from the runs there are (no runs started)
	$(PYTHON) scripts/aggregate.py table$* $(GRID_ARGS) --out $(RESULTS)

aggregate-melm_table%:
	$(PYTHON) scripts/aggregate.py melm_table$* $(GRID_ARGS) --out $(RESULTS)

grid-check:  ## fail if two grids would write one run with different settings
	$(PYTHON) scripts/grid.py check --profile $(PROFILE) --runs $(RUNS)
