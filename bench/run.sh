#!/usr/bin/env bash
# Builds release binaries, installs the load generator (oha, from crates.io) and runs
# bench/run.py. Results: a Markdown table on stdout and bench/results/latest.json.
# PORTCULLIS_BENCH_ONLY=peers also installs the peers (bench/peers.sh) and builds `portcullis`;
# PORTCULLIS_BENCH_ONLY=up (this build's `portcullis up` against PORTCULLIS_BENCH_BASELINE's) builds it too.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/portcullis-target}"
tools="$HOME/.cache/portcullis-tools"
if [ ! -x "$tools/bin/oha" ]; then
  cargo install oha --locked --root "$tools"
fi
packages=(-p portcullis-controlplane -p portcullis-gateway -p portcullis-tests)
if [ "${PORTCULLIS_BENCH_ONLY:-}" = peers ]; then
  bench/peers.sh
  packages+=(-p portcullis-cli)
elif [ "${PORTCULLIS_BENCH_ONLY:-}" = up ]; then
  packages+=(-p portcullis-cli)
fi
cargo build --release --locked "${packages[@]}" --bins
PORTCULLIS_BENCH_BIN="$CARGO_TARGET_DIR/release" PORTCULLIS_OHA="$tools/bin/oha" python3 bench/run.py
