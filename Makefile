# The same commands .ci/run uses, one target each.
.PHONY: install generate lint typecheck test test-fast model bench image ci

install:
	python -m pip install -e '.[test,dev]'

# store/redis_store.py from store/async_redis_store.py (unasync, then ruff); a test checks it is current.
generate:
	python -m store._generate

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

# The model-based test of the pass with fresh random schedules for MODEL_SECONDS (default 600),
# in rounds of MODEL_EXAMPLES (default 800).
model:
	MODEL_SECONDS=$${MODEL_SECONDS:-600} python -m pytest -q -p no:randomly --timeout=0 tests/model/test_model.py -k keep

bench:
	relayd bench

image:
	docker build -t relayd:dev .

ci:
	bash .ci/run
