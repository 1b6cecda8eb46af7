# The same commands .ci/run uses, one target each.
.PHONY: install lint typecheck test bench image ci

install:
	python -m pip install -e '.[test,dev]'

lint:
	ruff check .
	ruff format --check .

typecheck:
	mypy relayd store

test:
	python -m pytest -n 2

bench:
	relayd bench

image:
	docker build -t relayd:dev .

ci:
	bash .ci/run
