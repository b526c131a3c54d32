#!/bin/bash
# replay_belady.sh - the issue's hit-rate goal in CI: replay_smoke.sh's run,
# passing only when ours' measured GPU hit rate equals the Belady (MIN)
# optimum for the budget. Exit 0 pass, 1 fail.
GOAL=belady exec bash "$(dirname "${BASH_SOURCE[0]}")/replay_smoke.sh"
