#!/usr/bin/env bash
# Builds release binaries, installs the load generator (oha, from crates.io) and runs
# bench/run.py. Results: a Markdown table on stdout and bench/results/latest.json.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/portcullis-target}"
tools="$HOME/.cache/portcullis-tools"
if [ ! -x "$tools/bin/oha" ]; then
  cargo install oha --locked --root "$tools"
fi
cargo build --release --locked -p portcullis-controlplane -p portcullis-gateway -p portcullis-tests --bins
PORTCULLIS_BENCH_BIN="$CARGO_TARGET_DIR/release" PORTCULLIS_OHA="$tools/bin/oha" python3 bench/run.py
