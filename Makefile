# One setting = DATASET x GOLD x SEED under a PROFILE (configs/profiles/*.yaml); each of the three left
# out is the profile's own (paper: multiconer/en, 100, 1).
#   make setup && make test && make demo
#   make run METHOD=aclm DATASET=multiconer/en GOLD=100 SEED=1 PROFILE=tiny
# Extra config overrides go in ARGS, e.g. ARGS="ner.epochs=5 keywords.p=0.4".

VENV    ?= .venv
PYTHON  ?= $(VENV)/bin/python
TORCH   ?= torch==2.13.0
PROFILE ?= paper
METHOD  ?= aclm
ARGS    ?=
# DATASET, GOLD and SEED have no defaults here: each is passed only when given (command line or
# environment), so that a profile's own dataset, gold and seed (configs/profiles/paper.yaml: multiconer/en,
# 100, 1) are not overridden. A dataset folder trains on all of it unless GOLD is given (aclm/base/config.py).
given    = $(if $(filter command environment,$(firstword $(origin $(1)))),$(if $(strip $($(1))),$(2)=$(strip $($(1)))))
SETTING  = $(strip profile=$(PROFILE) $(call given,DATASET,dataset) $(call given,GOLD,gold) $(call given,SEED,seed) $(ARGS))
TINY     = models/tiny/manifest.json
MINI_GEN = models/mini/manifest.json
MINI_WARM = models/mini-warm/manifest.json
PAPER_SHAPE = models/paper_shape/manifest.json
PAPER_SHAPE_250K = models/paper_shape_250k/manifest.json
REAL_VOCAB = models/tiny-250k/manifest.json
# where every target finds the datasets: $ACLM_DATA_DIR when set, else ../shared/data when it is there, else ./data
export ACLM_DATA_DIR ?= $(if $(wildcard ../shared/data/.),$(abspath ../shared/data),$(abspath data))
# a recipe's first line: the models a run of method $(1) loads that are built here, not downloaded (paths
# under models/), each made first when missing; read from the run's resolved config, so a profile of your
# own gets them too (a config that does not load builds nothing, and the run then names what is wrong)
build_models = +@models=$$($(PYTHON) scripts/run_method.py --models method=$(1) $(SETTING) 2>/dev/null); \
	[ -z "$$models" ] || $(MAKE) --no-print-directory $$models

.PHONY: FORCE setup test test-all test-warm-generator demo preflight tiny-models real-vocab-models mini-generator warm-generator paper-shape-models splits fetch-data gold aclm run bench bench-paper-shape clean

setup:  ## create .venv with the pinned requirements (torch first: set TORCH_INDEX for a CUDA/CPU index)
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --upgrade pip
	$(VENV)/bin/pip install $(TORCH) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(VENV)/bin/pip install -r requirements.txt
	$(VENV)/bin/pip install --no-deps -e .

.PHONY: help
help:  ## list every target and what it does (% in a name: a table number, e.g. reproduce-table1)
	@awk -F ':[^#]*## ' '/^[A-Za-z0-9_%.-]+:[^=]*## / {printf "  %-24s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# always asked: each build script rebuilds only when its spec, seed, text as read or code changed
$(TINY): FORCE
	$(PYTHON) tools/build_tiny_models.py --out models/tiny

tiny-models: $(TINY)  ## small random-weight models of the paper's architectures (offline)

$(MINI_GEN): FORCE
	$(PYTHON) tools/pretrain_generator.py --out models/mini

$(MINI_WARM): FORCE
	$(PYTHON) tools/pretrain_generator.py --kind bert2bert --out models/mini-warm

# the tokenizers learn from MultiCoNER en's train text where it is there (realistic sequence lengths)
$(PAPER_SHAPE): FORCE
	text=$$ACLM_DATA_DIR/multiconer/en/train_full.conll; \
	$(PYTHON) tools/build_tiny_models.py --shape paper $$([ -f $$text ] && echo --text $$text)

$(PAPER_SHAPE_250K): FORCE
	$(PYTHON) tools/real_vocab.py --shape paper

paper-shape-models: $(PAPER_SHAPE) $(PAPER_SHAPE_250K)  ## random-weight models of the paper's sizes, its tagger and generator on the real vocabulary (13 GB, a few min)

$(REAL_VOCAB): FORCE
	$(PYTHON) tools/real_vocab.py --out models/tiny-250k

real-vocab-models: $(REAL_VOCAB)  ## tiny XLM-R and mBART-50 on the real 250k-piece vocabulary, rebuilt offline (~20 s)

mini-generator: $(MINI_GEN)  ## a small mBART-50 pretrained with mBART's denoising on WikiNEuRal en text (~15 min, 2 cores)

warm-generator: $(MINI_WARM)  ## mini_warm's generator: BERT2BERT warm-started from MiniLM, same denoising (~23 min, 2 cores)

FAST_TIER = not slow and not real_weights and not slurm and not cuda

test: $(TINY)  ## the fast tier: unit tests and short runs on tiny models (offline, a few minutes)
	$(PYTHON) -m pytest -rs -m "$(FAST_TIER)"

test-all: $(TINY)  ## every tier but the warm generator's: whole runs, the mini profile's real weights, Slurm (what CI runs)
	$(PYTHON) -m pytest -m "not warm_generator" --durations=25

test-warm-generator: $(TINY)  ## the mini_warm generator's acceptance check: after any change to tools/warm_start.py or the build
	$(PYTHON) -m pytest -rs -m warm_generator

demo: $(TINY) $(MINI_GEN)  ## Gold-only vs ACLM with the real mini encoder on multiconer/en 100 (CPU, 7.7 min measured; the generator's first build 11-15 min more)
	$(PYTHON) scripts/demo.py

# the profile's dataset and splits.seed where DATASET / SEED are not given
SPLIT_SETTING = $(strip profile=$(PROFILE) $(call given,DATASET,dataset) $(call given,SEED,splits.seed) $(ARGS))

splits:  ## stratified low-resource samples of DATASET (or the profile's) into splits/DATASET/seedSEED
	$(PYTHON) scripts/make_splits.py $(SPLIT_SETTING)

fetch-data:  ## write DATASET's files (e.g. conll2003/en) into the data folder from the Hugging Face hub (network)
	$(PYTHON) scripts/fetch_data.py $(strip profile=$(PROFILE) $(call given,DATASET,dataset) $(ARGS))

gold:  ## S0 + S1: the gold sample and the Gold-only model, evaluated
	$(call build_models,gold_only)
	$(PYTHON) scripts/ner.py $(SETTING)

aclm:  ## the whole ACLM pipeline (S1-S7) for one setting
	$(call build_models,aclm)
	$(PYTHON) scripts/run_method.py method=aclm $(SETTING)

preflight:  ## first on a GPU machine: the profile's real models checked, then S0-S7 on 16 sentences (<= 10 min)
	$(call build_models,aclm)
	$(PYTHON) scripts/preflight.py $(SETTING)

run:  ## any method of the method table (`scripts/run_method.py --list`) for one setting
	$(call build_models,$(METHOD))
	$(PYTHON) scripts/run_method.py method=$(METHOD) $(SETTING)

# BENCH_ARGS="profile=mini generator.model=<a mini run's s4_generator>": usable augmentations of a fine-tuned generator
bench: $(TINY)  ## throughput of S2/S3/retrieval/generation, the released code's approach beside ours, usable per CPU s
	OMP_NUM_THREADS=1 $(PYTHON) tools/benchmark.py $(BENCH_ARGS)

bench-paper-shape: $(PAPER_SHAPE) $(PAPER_SHAPE_250K)  ## one ACLM setting at paper size: time, memory, bytes per stage; Table 1 estimate
	$(PYTHON) tools/stage_costs.py $(ARGS)

clean:  ## delete runs/ and the tiny and paper-size models built here (not the mini generator)
	rm -rf runs models/tiny models/paper_shape models/paper_shape_250k

# --- Paper tables (configs/grids/<table>.yaml) ---------------------------------------------
#   make reproduce-table1 PROFILE=paper -j 4            all of Table 1, then the table
#   make reproduce-table1 PROFILE=paper JOBS=auto       as many runs at once as the GPU holds of their
#                                                       taggers, each stage leasing its memory (scripts/grid.py
#                                                       jobs, aclm/run/gpu_share.py; docs/cost.md)
#   make reproduce-table1 LANGS=en SIZES=100,200 METHODS=gold_only,aclm SEEDS=1,2
#   make reproduce-table1 ROUNDS_ON_DEV=1,2,5,10          every augmentation method at each R, the best on dev
#   make reproduce-melm_table1 ... ; make aggregate-table3 (the table only, no runs)
# Each run is a file target (its result.json); methods wait for their setting's S1, so -j
# never trains one S1 twice. -k keeps going past a failed run, which leaves failed.json and
# shows as FAILED in the table; make exits non-zero after printing the table.
# Several GPUs: one make per GPU on disjoint LANGS or SEEDS slices (not METHODS: the methods
# of a setting share S1), each slice gets its own fragment:
#   CUDA_VISIBLE_DEVICES=0 make reproduce-table1 LANGS=en,bn,hi,de,es &
#   CUDA_VISIBLE_DEVICES=1 make reproduce-table1 LANGS=ko,nl,ru,tr,zh &
# TEST_SET=official: a MultiCoNER grid on the official MultiCoNER v1 test sets (the release under
# $ACLM_DATA_DIR/multiconer_official/; configs/datasets.yaml), not the data folder's 2,000-sentence slices.
# GNU parallel / Slurm job arrays: `scripts/grid.py list TABLE --phase N` (see aclm/experiments/grid.py).
LANGS   ?=
SIZES   ?=
METHODS ?=
SEEDS   ?=
TEST_SET ?=
ROUNDS_ON_DEV ?=
JOBS    ?=
RUNS    ?= runs
RESULTS ?= results
GRID_ARGS = profile=$(PROFILE) run_dir=$(RUNS) $(if $(LANGS),langs=$(LANGS)) \
            $(if $(SIZES),sizes=$(SIZES)) $(if $(METHODS),methods=$(METHODS)) $(if $(SEEDS),seeds=$(SEEDS)) \
            $(if $(TEST_SET),test_set=$(TEST_SET)) $(if $(ROUNDS_ON_DEV),rounds_on_dev=$(ROUNDS_ON_DEV))

define reproduce_grid
	+@frag=$$($(PYTHON) scripts/grid.py makefile $(1) $(GRID_ARGS) --python $(PYTHON)) || exit 1; \
	ledger=$${frag%.mk}.gpu.json; \
	jobs=$(if $(filter auto,$(JOBS)),$$($(PYTHON) scripts/grid.py jobs $(1) $(GRID_ARGS) --ledger $$ledger) || exit 1,$(JOBS)); \
	$(if $(filter auto,$(JOBS)),ACLM_GPU_LEDGER=$$ledger) $(MAKE) -k $${jobs:+-j $$jobs} -f $$frag all; status=$$?; \
	$(PYTHON) scripts/aggregate.py $(1) $(GRID_ARGS) --out $(RESULTS) || status=1; \
	exit $$status
endef

reproduce-table%:  ## run a paper table's grid (make -j N passes through), then print the table
	$(call build_models,aclm)
	$(call reproduce_grid,table$*)

reproduce-melm_table%:  ## the same for MELM's CoNLL tables
	$(call build_models,aclm)
	$(call reproduce_grid,melm_table$*)

reproduce-mini_table%:  ## a CPU-sized miniature (configs/grids/mini_table1.yaml, PROFILE=mini)
	$(call build_models,aclm)
	$(call reproduce_grid,mini_table$*)

# Slurm: the runs not done as dependent job arrays, then the table (docs/cluster.md). SLURM_ARGS
# passes e.g. "--dry-run", "--partition gpu --account proj", "--cluster-config my-cluster.yaml".
SLURM_ARGS ?=

submit-table%:  ## submit a paper table's missing runs to Slurm, then a job writing the table
	$(PYTHON) scripts/grid.py submit table$* $(GRID_ARGS) --results $(RESULTS) --slurm $(SLURM_ARGS)

# --- A CUDA machine: what the GPU paths do and cost (docs/gpu-check.md) ------------------------
DRY            ?=
BUNDLE         ?=
PYTHON_VERSION ?= 3.12
.PHONY: gpu-check gpu-bundle

gpu-check:  ## on a CUDA machine: CUDA tests, a paper-size setting, batch and -j sweeps, configs/gpu_peaks.json (<= 40 min); DRY=1: CPU dry run
	$(PYTHON) tools/gpu_check.py run $(if $(DRY),--dry-run) $(if $(BUNDLE),--bundle $(BUNDLE))

gpu-bundle:  ## pip download of the wheels (no torch) and the data an offline CUDA node lacks for gpu-check, into gpu-bundle/ (<= 64 MiB)
	$(PYTHON) tools/gpu_check.py bundle --python-version $(PYTHON_VERSION) --out gpu-bundle

prune-table%:  ## delete the S1 weights of the table's finished settings (a later run retrains S1)
	$(PYTHON) scripts/grid.py prune table$* $(GRID_ARGS)

export-table%:  ## a table's artifacts (gold samples, augmented sets, S6 reports, predictions, results) in exports/
	$(PYTHON) scripts/export_table.py table$* $(GRID_ARGS) --out exports $(if $(TAR),--tar)

aggregate-table%:  ## print and write a table from the runs there are (no runs started)
	$(PYTHON) scripts/aggregate.py table$* $(GRID_ARGS) --out $(RESULTS)

aggregate-melm_table%:  ## the same for MELM's CoNLL tables
	$(PYTHON) scripts/aggregate.py melm_table$* $(GRID_ARGS) --out $(RESULTS)

# Tables of any finished runs, in a grid or not (scripts/tabulate_runs.py): run folders, result.json
# files or globs, quoted so that ** spans folders; PAPER=<grid> puts that table's numbers beside.
#   make table RUNS_GLOB='runs/tiny/**/result.json'
#   make table RUNS_GLOB='runs/mini/multiconer/de/gold300 runs/mini/local' PAPER=table1
#   make table RUNS_GLOB=runs/mini_warm/multiconer/en/gold100 AGAINST=gold_only_tuned   # [p=...] per entry
RUNS_GLOB ?= $(RUNS)/$(PROFILE)/**/result.json
PAPER     ?=
AGAINST   ?=
.PHONY: table

table:  ## tables (F1, F1 per type) of any finished runs: RUNS_GLOB, PAPER=<grid> beside; into $(RESULTS)/tabulate
	$(PYTHON) scripts/tabulate_runs.py $(foreach g,$(RUNS_GLOB),'$(g)') --out $(RESULTS)/tabulate $(if $(PAPER),--paper $(PAPER)) $(if $(AGAINST),--against $(AGAINST))

grid-check:  ## fail if two grids would write one run with different settings
	$(PYTHON) scripts/grid.py check profile=$(PROFILE) run_dir=$(RUNS)
