# The README's two commands: `make demo` and `make test`. Both set up everything from nothing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
DEMO_PORT ?= 8765
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: demo test test-fast lint typecheck migrations-check services browser pytest noextras newest versions tutorial docs package clean

#: The Pythons pyenv installed besides the selected one (its shims refuse them): on tox's PATH.
PYENV_PATH := $(shell ls -d "$$(pyenv root 2>/dev/null)"/versions/3.1*/bin 2>/dev/null | tr '\n' ':')

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[production,llm,dev]"
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

venv: $(STAMP)

## make demo: the example project in embedded mode (SQLite, in-process turns) and a scripted
## personal agent talking to it over real HTTP.
demo: $(STAMP)
	$(PY) -m example_project.demo --port $(DEMO_PORT)

## make test: lint, types, migrations and the whole suite against PostgreSQL and Redis (with
## the tutorial done from the built wheel), then the package without its optional extras.
test: $(STAMP) services browser lint typecheck migrations-check package pytest noextras newest docs

## make test-fast: lint, types, migrations and the in-process suites, for day-to-day work. The
## lanes it leaves to `make test` start processes or a browser: the marks multiprocess
## (clusters, conformance, kill campaigns), browser and tutorial; and the install without
## extras, the package build and the docs build (docs/running-tests.md).
FAST_LANES := not embedded and not multiprocess and not browser and not tutorial
test-fast: $(STAMP) services lint typecheck migrations-check
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/poppy} \
	POPPY_TEST_REDIS_URL=$${POPPY_TEST_REDIS_URL:-redis://127.0.0.1:6379/15} \
	$(PY) -m pytest -p no:cacheprovider -m "$(FAST_LANES)"
	$(PY) -m pytest -p no:cacheprovider --ds=tests.settings_embedded -m embedded tests/embedded

services:
	@bash scripts/ensure-services.sh

browser:
	@bash scripts/ensure-browser.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check --no-cache .
	$(VENV)/bin/ruff format --check --no-cache .
	$(VENV)/bin/lint-imports --no-cache

typecheck: $(STAMP)
	$(VENV)/bin/mypy poppy_django example_project

migrations-check: $(STAMP)
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/poppy} $(PY) manage.py makemigrations --check --dry-run

pytest: $(STAMP)
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/poppy} \
	POPPY_TEST_REDIS_URL=$${POPPY_TEST_REDIS_URL:-redis://127.0.0.1:6379/15} \
	$(PY) -m pytest -p no:cacheprovider -m "not embedded"
	$(PY) -m pytest -p no:cacheprovider --ds=tests.settings_embedded -m embedded tests/embedded

## The package installed without its optional extras (tox.ini: py311-noextras).
noextras: $(STAMP)
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/poppy} \
	POPPY_TEST_REDIS_URL=$${POPPY_TEST_REDIS_URL:-redis://127.0.0.1:6379/15} \
	$(VENV)/bin/tox -q -e py311-noextras

## The newest Python x Django pair pyproject.toml claims (3.13, 6.1): its compatibility lane
## (tox.ini: py313-django61-compat).
newest: $(STAMP)
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/poppy} \
	POPPY_TEST_REDIS_URL=$${POPPY_TEST_REDIS_URL:-redis://127.0.0.1:6379/15} \
	PATH="$(PYENV_PATH)$$PATH" $(VENV)/bin/tox -q -e py313-django61-compat

## Every Python x Django pair of tox.ini, with the tox subset (longer: not in `test`).
versions: $(STAMP)
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/poppy} \
	POPPY_TEST_REDIS_URL=$${POPPY_TEST_REDIS_URL:-redis://127.0.0.1:6379/15} \
	PATH="$(PYENV_PATH)$$PATH" $(VENV)/bin/tox -q

## docs/tutorial.md done for real, alone (it is part of `make pytest` too).
tutorial: $(STAMP)
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/poppy} \
	POPPY_TEST_REDIS_URL=$${POPPY_TEST_REDIS_URL:-redis://127.0.0.1:6379/15} \
	$(PY) -m pytest -p no:cacheprovider -m tutorial tests/tutorial

## The sdist and the wheel, built in isolation as a release is, and their metadata checked
## (twine check --strict: the README renders on the index, every field is valid).
package: $(STAMP)
	@rm -rf var/dist
	$(PY) -m build --outdir var/dist .
	$(VENV)/bin/twine check --strict var/dist/*

docs: $(STAMP)
	@if [ -f mkdocs.yml ]; then $(VENV)/bin/mkdocs build --strict --site-dir var/site; fi

clean:
	rm -rf $(VENV) var .tox
