# The two commands of the README. Both set up a fresh machine themselves (tools/bootstrap).
.PHONY: site test bench bench-tuning soak down venv ee

site:        ## bring up the simulated 18-tray rack and run playbooks/site.yml against it
	tools/site-demo

test:        ## the whole test suite (CI runs exactly this)
	tools/test

bench:       ## benchmark against the ping floor; writes bench/out/
	tools/bootstrap && .venv/bin/python bench/run.py

bench-tuning: ## the operator settings (forks, pipelining, SSH multiplexing, facts) on one rack
	tools/bootstrap && .venv/bin/python bench/run.py --tuning

# SEED= (default: a new one, printed first), STEPS=, RACKS=, TRAYS=; SHRINK=1 searches the smallest
# failing series; SOAK_ARGS= passes more options (--keep-faults, printed by a shrink).
SEED ?=
STEPS ?= 50
RACKS ?= 2
TRAYS ?= 4
SHRINK ?=
SOAK_ARGS ?=
soak:        ## seeded chaos soak on a simulated rack; writes soak/out/results.json and summary.md
	tools/bootstrap && .venv/bin/python soak/run.py $(if $(SEED),--seed $(SEED)) --steps $(STEPS) \
	  --racks $(RACKS) --trays $(TRAYS) $(if $(SHRINK),--shrink) $(SOAK_ARGS)

down:        ## tear down the simulated rack left by `make site KEEP_RACK=1`
	tests/rack/simrack down

ee:          ## render the execution environment's build context in .build/ee-context
	tools/bootstrap && PATH=$(CURDIR)/.venv/bin:$$PATH tools/ee-context

venv:
	tools/bootstrap
