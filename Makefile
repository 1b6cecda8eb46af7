# The same commands .ci/run uses, one target each.
.PHONY: install lint typecheck test test-fast bench image ci

install:
	python -m pip install -e '.[test,dev]'

lint:
	ruff check .
	ruff format --check .

typecheck:
	mypy relayd store
	mypy tests

test:
	python -m pytest -n 2

# The fast tier for local work: everything but the tests marked slow (CI runs them all).
test-fast:
	python -m pytest -n 2 -m "not slow"

bench:
	relayd bench

image:
	docker build -t relayd:dev .

ci:
	bash .ci/run
