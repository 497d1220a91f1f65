#!/usr/bin/env bash
# Installs the peers that `PORTCULLIS_BENCH_ONLY=peers` measures Portcullis against, from the
# package registries only, into $HOME/.cache/portcullis-tools; each is optional and installed
# once (a second run finds it and does nothing):
#
#   crabllm      crates.io, `cargo install` into tools/bin
#   portkey      npm `@portkey-ai/gateway` into tools/portkey, with `@hono/node-server` pinned
#                to 1.14.1 through `overrides` (newer versions break every streamed request)
#   litellm      PyPI `litellm[proxy]` into the venv tools/litellm
#
# PORTCULLIS_BENCH_PEERS chooses (default: all three, comma-separated; `none` for none). A peer
# whose install fails is left out (bench/peers.py says so in the table) and the rest go on;
# the reason is in tools/peers-install-NAME.log.
set -uo pipefail
tools="$HOME/.cache/portcullis-tools"
peers=",${PORTCULLIS_BENCH_PEERS:-crabllm,portkey,litellm},"
mkdir -p "$tools"

CRABLLM_VERSION=0.0.25
PORTKEY_VERSION=1.15.2
HONO_NODE_SERVER_VERSION=1.14.1
# The newest whose `proxy` extra resolves from the registry here (1.110 needs `litellm-proxy`,
# 1.108-1.109 `litellm-proxy-extras` versions it does not have); 1.107.0 was a compromised
# release (never use it).
LITELLM_VERSION=1.106.12

install_crabllm() {
  # crabllm has no --version: cargo's own record of what it installed says which one.
  if [ -x "$tools/bin/crabllm" ] && grep -q "^\"crabllm $CRABLLM_VERSION " "$tools/.crates.toml"; then
    return 0
  fi
  cargo install crabllm --version "$CRABLLM_VERSION" --locked --root "$tools"
}

install_portkey() {
  local dir="$tools/portkey"
  if [ -f "$dir/node_modules/@portkey-ai/gateway/package.json" ] &&
     grep -q "\"version\": \"$HONO_NODE_SERVER_VERSION\"" "$dir/node_modules/@hono/node-server/package.json"; then
    return 0
  fi
  mkdir -p "$dir"
  cat > "$dir/package.json" <<EOF
{
  "name": "portcullis-bench-portkey",
  "private": true,
  "dependencies": { "@portkey-ai/gateway": "$PORTKEY_VERSION" },
  "overrides": { "@hono/node-server": "$HONO_NODE_SERVER_VERSION" }
}
EOF
  (cd "$dir" && npm install --omit=dev --no-audit --no-fund) &&
    grep -q "\"version\": \"$HONO_NODE_SERVER_VERSION\"" "$dir/node_modules/@hono/node-server/package.json"
}

install_litellm() {
  local venv="$tools/litellm"
  if [ -x "$venv/bin/litellm" ] && "$venv/bin/pip" show litellm | grep "^Version: $LITELLM_VERSION$" > /dev/null; then
    return 0
  fi
  python3 -m venv "$venv" &&
    "$venv/bin/pip" install --quiet --upgrade pip &&
    "$venv/bin/pip" install --quiet "litellm[proxy]==$LITELLM_VERSION"
}

for peer in crabllm portkey litellm; do
  case "$peers" in *",$peer,"*) ;; *) continue ;; esac
  log="$tools/peers-install-$peer.log"
  if "install_$peer" > "$log" 2>&1; then
    echo "peers: $peer ready" >&2
  else
    echo "peers: $peer failed to install, left out (see $log)" >&2
  fi
done
