#!/usr/bin/env bash
# What a new user runs first: installs what is missing, builds rkmojo, and
# runs the demo (a synthetic ~2 GB MoE model: synth -> convert -> generate
# under a 512 MiB memory budget, its experts streamed from disk, with the
# statistics). A synthetic model has random weights: it speaks noise.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
make -j"$(nproc 2>/dev/null || echo 2)" build/rkmojo
exec build/rkmojo demo "$@"
