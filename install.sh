#!/usr/bin/env bash
# Builds the release binaries and installs portcullis, portcullis-controlplane and
# portcullis-gateway into a prefix (default ~/.local/bin). Re-runnable.
#
#   ./install.sh [--prefix DIR]
set -euo pipefail
cd "$(dirname "$0")"

prefix="$HOME/.local/bin"
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --prefix=*) prefix="${1#--prefix=}"; shift ;;
    -h|--help) sed -n '2,5p' "$0"; exit 0 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
done

command -v cargo >/dev/null 2>&1 || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }
scripts/install-deps

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --release --locked --bins -p portcullis-cli -p portcullis-controlplane -p portcullis-gateway

mkdir -p "$prefix"
for bin in portcullis portcullis-controlplane portcullis-gateway; do
  install -m 0755 "$CARGO_TARGET_DIR/release/$bin" "$prefix/$bin"
done
echo "Installed portcullis, portcullis-controlplane and portcullis-gateway into $prefix."
case ":$PATH:" in
  *":$prefix:"*) ;;
  *) echo "Add $prefix to your PATH to run them by name." >&2 ;;
esac
