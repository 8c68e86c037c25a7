# Torch Doctor: every command a student, an instructor or a maintainer needs. A fresh clone needs only
# Python 3.11 and make: each target builds the virtual environment first.

ifndef PYTHON
PYTHON := $(shell command -v python3.11 || command -v python3)
endif
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
STAMP := $(VENV)/.installed
DEVICE ?= auto
ASSIGNMENT ?=
FORCE ?=
COURSE := autograder
# The assignments to grade: ASSIGNMENT's names when each is a ready assignment of course.toml, else all ready ones;
# an unknown name stops the recipe with one line that lists the known ones.
ASSIGNMENTS = $$($(BIN)/python -m course_tools.manifest_cli assignments $(ASSIGNMENT))
# FORCE=1 redoes what was done before; FORCE=0 or no FORCE does not; anything else is an error.
FORCE_FLAG = $(if $(filter-out 0 1,$(FORCE)),$(FORCE_ERROR))$(if $(filter 1,$(FORCE)),--force)
FORCE_ERROR = $(error FORCE=$(FORCE) is neither 1 (redo) nor 0 (don't))

# nbgrader shells out to alembic: every nbgrader call must find the venv's bin/ first on PATH.
export PATH := $(BIN):$(PATH)

.PHONY: setup lab lab-instructor browser test lint test-notebooks test-notebooks-matrix site release autograde feedback clean \
	i18n-update i18n-build i18n-check i18n-test-notebooks

setup: $(STAMP)

# Rebuilt when a pin changes; a second `make setup` with nothing changed does nothing.
$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "The course needs Python 3.11; set PYTHON=/path/to/python3.11")'
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(VENV)/bin/python -m pip uninstall --quiet --disable-pip-version-check -y rfc3987-syntax  # see requirements.txt
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $@

# Extra arguments for JupyterLab, e.g. LAB_ARGS="--no-browser --port 8890". Root (containers) needs --allow-root.
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)
# Two views of the same course, each a Jupyter configuration folder in views/ put first on JUPYTER_CONFIG_PATH (it
# wins over ~/.jupyter, which is left unchanged): the student's (Validate button and assignment list; no Formgrader,
# no Create Assignment, no news prompt) and the instructor's (adds the Formgrader and Create Assignment).
# `make lab LANG=zh_CN`: the Chinese chapters and homework (build/zh_CN/, written by `make i18n-build` first) in the
# student's view, and torchdoctor's explain() in Chinese. LANG is also the locale variable: one given on make's
# command line is taken here as the course's language (COURSE_LANG) and replaced by C.UTF-8 before anything runs, so
# `zh_CN` never becomes the locale of Python or Jupyter. COURSE_LANG=zh_CN does the same without touching LANG.
COURSE_LANGUAGES := en zh_CN
ifeq ($(origin LANG),command line)
COURSE_LANG := $(patsubst en_%,en,$(firstword $(subst ., ,$(subst -,_,$(LANG)))))
override LANG := C.UTF-8
endif
COURSE_LANG ?= en
LAB_CHINESE = $(filter-out en,$(COURSE_LANG))
LAB_CHECK = $(if $(filter $(COURSE_LANG),$(COURSE_LANGUAGES)),,$(error LANG=$(COURSE_LANG) is not one of the course's \
	languages: $(COURSE_LANGUAGES)))
lab: setup $(if $(filter-out en,$(COURSE_LANG)),i18n-build)
	$(LAB_CHECK)$(if $(LAB_CHINESE),TORCHDOCTOR_LANG=$(COURSE_LANG) )JUPYTER_CONFIG_PATH=$(CURDIR)/views/student \
		$(BIN)/jupyter lab --notebook-dir=$(CURDIR)$(if $(LAB_CHINESE),/build/$(COURSE_LANG)) $(LAB_ARGS)

lab-instructor: setup
	JUPYTER_CONFIG_PATH=$(CURDIR)/views/instructor $(BIN)/jupyter lab --notebook-dir=$(CURDIR) $(LAB_ARGS)

# The browser tests drive a real Chromium (tests/browser/). Installed from Debian's or Ubuntu's `chromium` package
# where none is found and apt-get can run (as root, or through passwordless sudo); elsewhere the tests skip and say
# why. CHROMIUM=/path/to/chromium picks another one.
CHROMIUM_FOUND = $$(test -n "$(CHROMIUM)" && echo "$(CHROMIUM)" || command -v chromium || command -v chromium-browser \
	|| command -v google-chrome || command -v google-chrome-stable)
APT_INSTALL_CHROMIUM = apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
browser:
	@if [ -n "$(CHROMIUM_FOUND)" ]; then exit 0; fi; \
	if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then set -x; $(APT_INSTALL_CHROMIUM); \
	elif command -v apt-get >/dev/null && command -v sudo >/dev/null && sudo -n true 2>/dev/null; then \
		set -x; sudo sh -c '$(APT_INSTALL_CHROMIUM)'; \
	else echo "No Chromium here and no way to install one (apt-get as root): the browser tests will skip."; fi

# Everything CI checks: lint, the notebooks and pytest side by side, a time per part; ends with pytest's summary line.
test: setup browser
	@bash .ci/grading_services.sh install
	$(BIN)/python -m course_tools.test_all --device $(DEVICE)

lint: setup
	$(BIN)/ruff check .

# Chapters, solutions and starters through papermill, every declared error checked (FAST mode).
test-notebooks: setup
	$(BIN)/python -m course_tools.run_notebooks --device $(DEVICE)

# The same set in every configuration a student meets: FAST mode at SEED 0, 1 and 2, and full mode (the notebooks'
# default), each into build/matrix/<configuration>/; CONFIG="fast-seed1 full-seed0" runs some. Not part of `make test`
# (too long for its budget); the workflow runs it as a matrix of jobs.
test-notebooks-matrix: setup
	$(BIN)/python -m course_tools.notebook_matrix --device $(DEVICE) $(foreach c,$(CONFIG),--config $(c))

# The seed sweep (issue 34): a claim must hold at any seed. Every ready chapter and reference notebook in FAST mode at
# SWEEP_FAST seeds and in full mode at SWEEP_FULL seeds (a range 0-15, a list 3,7 or "" for none), one run per notebook
# and seed, into build/sweep/; a failing run is reported with its seed, its mode, its cell and the command that reruns
# it. NOTEBOOKS="course/02_gradients.ipynb ..." limits it. Not part of `make test` (about an hour here for all of it); the
# workflow's scheduled seed-sweep job runs it one seed per job.
SWEEP_FAST ?= 0-15
SWEEP_FULL ?= 0-2
.PHONY: test-notebooks-sweep
test-notebooks-sweep: setup
	$(BIN)/python -m course_tools.seed_sweep --device $(DEVICE) --fast-seeds "$(SWEEP_FAST)" --full-seeds "$(SWEEP_FULL)" \
		$(NOTEBOOKS)

# The course site in build/site/ (open build/site/index.html): every ready chapter and the cheat sheet as executed by
# `make test-notebooks` (those missing or older than their source are executed first), contents from course.toml.
# Both languages in one site: the Chinese pages in build/site/zh_CN/, from the Chinese notebooks executed in Chinese
# (those missing or older than their notebook or catalogue are executed first, as by `make i18n-test-notebooks`), a
# language switch on every page. `make site LANG=zh_CN` builds the same site and names build/site/zh_CN/index.html.
site: setup
	$(LAB_CHECK)$(BIN)/python -m course_tools.site --device $(DEVICE) --language $(COURSE_LANG)

# Regenerate exercises/ and solutions/ from autograder/source/ for the ready assignments of course.toml (or ASSIGNMENT).
release: setup
	$(BIN)/python -m course_tools.release $(ASSIGNMENT)

# Grade what is in autograder/submitted/ (one assignment with ASSIGNMENT=name, else every ready one of course.toml):
# isolated kernels, verdicts outside them, one task per submission on a Dask cluster; then grades.csv (nbgrader
# export) and results/<assignment>.json. Already graded submissions are skipped, as by nbgrader; FORCE=1 grades them
# again. ENGINE=local (default: one worker per core here), dask (SCHEDULER=tcp://host:port) or slurm (QUEUE, CORES,
# MEMORY, WALLTIME, GPUS per job; WORKERS jobs); DB_URL=postgresql://... for a shared gradebook (docs/instructors.md "Grading a
# big class").
ENGINE ?= local
GRADING_OPTIONS = --engine $(ENGINE) $(if $(SCHEDULER),--scheduler $(SCHEDULER)) $(if $(DB_URL),--db-url $(DB_URL)) \
	$(if $(WORKERS),--workers $(WORKERS)) $(if $(QUEUE),--queue $(QUEUE)) $(if $(CORES),--cores $(CORES)) \
	$(if $(MEMORY),--memory $(MEMORY)) $(if $(WALLTIME),--walltime $(WALLTIME)) $(if $(GPUS),--gpus $(GPUS))
autograde: setup
	@names="$(ASSIGNMENTS)" && set -x && $(BIN)/python -m course_tools.grading.autograde $$names $(FORCE_FLAG) \
		$(GRADING_OPTIONS)

# Feedback for graded submissions; like nbgrader it skips students who have feedback already, FORCE=1 redoes it.
feedback: setup
	@names="$(ASSIGNMENTS)" && cd $(COURSE) && for a in $$names; do \
		(set -x && $(BIN)/nbgrader generate_feedback "$$a" $(FORCE_FLAG)) || exit 1; done

# The course in Chinese (issue 24; docs/authors.md "Translating the course"). Catalogues locale/zh_CN/<notebook>.po
# of every chapter, the cheat sheet and every homework student notebook: markdown cells only, msgctxt = cell id.
# i18n-update extracts the English and merges it (an edited paragraph keeps its old Chinese, marked fuzzy; a deleted
# one becomes obsolete); i18n-build writes build/zh_CN/<notebook>.ipynb (code cells, outputs and metadata unchanged);
# i18n-check (part of `make test`) fails on any problem of a notebook marked zh_CN = "ready" in course.toml and
# prints every notebook's translated share. NOTEBOOKS="course/01_dimensions.ipynb ..." limits them to some.
i18n-update: setup
	$(BIN)/python -m course_tools.i18n update $(NOTEBOOKS)

i18n-build: setup
	$(BIN)/python -m course_tools.i18n build $(if $(filter lab,$(MAKECMDGOALS)),,$(NOTEBOOKS))

i18n-check: setup
	$(BIN)/python -m course_tools.i18n check $(NOTEBOOKS)

# The Chinese notebooks through the notebook runner's checks (as `make test-notebooks`; not part of `make test`).
i18n-test-notebooks: i18n-build
	$(BIN)/python -m course_tools.i18n run --device $(DEVICE) $(NOTEBOOKS)

# The bug clinic's gate (issue 25; docs/authors.md "Bug clinic"): every case (template x bug operator) run on SEEDS
# seeds in subprocesses, JOBS side by side; prints the matrix (validated, rejected and why, times) and writes
# build/clinic/matrix.json. TEMPLATE="..." and OPERATOR="..." limit it.
.PHONY: clinic-validate
SEEDS ?= 3
JOBS ?= 2
TEMPLATE ?=
OPERATOR ?=
clinic-validate: setup
	$(BIN)/python -m torchdoctor.clinic validate --seeds $(SEEDS) --jobs $(JOBS) --json build/clinic/matrix.json \
		$(foreach t,$(TEMPLATE),--template $(t)) $(foreach o,$(OPERATOR),--operator $(o))

# The gate for pairs of bugs (docs/authors.md "Bug clinic"): pairs of cases validated by clinic-validate, on the fast
# templates, each pair's script with both bugs and each single bug on SEEDS seeds; writes build/clinic/pairs.json.
# Then `python -m torchdoctor.clinic cases` writes both into torchdoctor/clinic/cases.json.
.PHONY: clinic-validate-pairs
clinic-validate-pairs: setup
	$(BIN)/python -m torchdoctor.clinic validate --pairs --seeds $(SEEDS) --jobs $(JOBS) --json build/clinic/pairs.json

# The whole gate, single cases then pairs, compared with what students are offered: fails when a case or pair of
# torchdoctor/clinic/cases.json is no longer validated (a part of `make test`; about 2 minutes here).
.PHONY: clinic-gate
clinic-gate: setup
	$(BIN)/python -m torchdoctor.clinic gate --seeds $(SEEDS) --jobs $(JOBS)

# The bug clinic exam (issue 25; docs/instructors.md "Bug clinic exam"): one validated case per student, drawn from
# SEED and the student id, for N students (student01, student02...) or those of STUDENTS (a file, one id a line):
# an nbgrader course in EXAM_DIR/course (default build/clinic_exam), each student's notebook in EXAM_DIR/students/ and
# the key in EXAM_DIR/roster.csv. Grade it in EXAM_DIR/course with nbgrader autograde.
.PHONY: clinic-exam
N ?=
STUDENTS ?=
SEED ?=
EXAM_DIR ?= build/clinic_exam
clinic-exam: setup
	$(BIN)/python -m course_tools.clinic_exam $(if $(N),--students $(N)) $(if $(STUDENTS),--roster-file $(STUDENTS)) \
		--seed "$(SEED)" --out $(EXAM_DIR)

# The messages of other PyTorch releases (issue 38; docs/authors.md "Messages of other releases"): every catalog
# reproducer under each release from 2.6 to the pinned one (RELEASE=2.9.1 for one), each in a throwaway environment
# under /tmp, into tests/torchdoctor/message_corpus/<release>.json, which make test checks explain against. Not a part
# of make test: it downloads one torch wheel per release (about 1 GB each, deleted afterwards).
.PHONY: message-corpus
RELEASE ?=
message-corpus: setup
	$(BIN)/python -m course_tools.message_corpus $(foreach r,$(RELEASE),--release $(r))

clean:
	rm -rf build

# The offline GPU check (issue 38; docs/instructors.md "Checking the course on a GPU node"; course_tools/gpu_check.py).
# `make wheelhouse PYTHON_VERSION=3.12`, where there is a network: the wheels the check needs beyond torch and
# torchvision (every other pin of requirements.txt but the Chinese edition's Markdown extraction, with their
# dependencies) for that CPython on manylinux x86_64, into WHEELHOUSE. `make test-gpu WHEELHOUSE=... PYTHON=...` on a GPU
# node without network: GPU_ENV, a virtual environment over PYTHON's packages (its torch), gets the wheelhouse through
# pip --no-index; then the notebooks with DEVICE=cuda, every test marked cuda and every catalog reproducer run there
# (into build/gpu/), with a table per notebook and what the node's torch release words otherwise than the pinned one.
# Without a usable CUDA device it says so and fails. Neither needs `make setup`.
.PHONY: wheelhouse test-gpu
WHEELHOUSE ?= build/wheelhouse
PYTHON_VERSION ?= $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
GPU_ENV ?= build/gpu-env
wheelhouse:
	$(PYTHON) -m course_tools.gpu_check wheelhouse --python-version $(PYTHON_VERSION) --dest $(WHEELHOUSE)

test-gpu:
	$(PYTHON) -m course_tools.gpu_check install --wheelhouse $(WHEELHOUSE) --env $(GPU_ENV)
