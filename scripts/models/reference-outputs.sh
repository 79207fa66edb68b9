#!/usr/bin/env bash
# Reference outputs from ONNX Runtime (CPU) for the OCR models fetched by fetch-ocr-models.sh.
#
# Usage: scripts/models/reference-outputs.sh [CACHE_DIR] [-- extra ort_reference.mjs args, e.g. --cases cls]
#   CACHE_DIR defaults to ${QD_CACHE:-$HOME/.cache/qdeploy}/models
#
# 1. runs fetch-ocr-models.sh CACHE_DIR (a no-op when the models are there),
# 2. installs onnxruntime-node (pinned) into CACHE_DIR/ort with `npm install --ignore-scripts` (its postinstall only
#    downloads optional GPU binaries; the CPU library ships inside the package) -- skipped when already installed,
# 3. runs ort_reference.mjs, which writes CACHE_DIR/refs/<case>/{input_*.npy, output_*.npy, meta.json}.
# Needs node >= 16 and npm (registry reachable for step 2 the first time).
set -euo pipefail

ORT_VERSION="1.23.2"

die() { echo "reference-outputs: error: $*" >&2; exit 1; }
log() { echo "reference-outputs: $*" >&2; }

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE_DIR="${QD_CACHE:-$HOME/.cache/qdeploy}/models"
if [[ $# -gt 0 && "$1" != "--" ]]; then CACHE_DIR="$1"; shift; fi
[[ $# -gt 0 && "$1" == "--" ]] && shift

command -v node >/dev/null 2>&1 || die "'node' not found in PATH"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[[ "$node_major" -ge 16 ]] || die "node >= 16 needed (found $(node --version))"

"$HERE/fetch-ocr-models.sh" "$CACHE_DIR"

ORT_DIR="$CACHE_DIR/ort"
installed="$(node -p "try { require('$ORT_DIR/node_modules/onnxruntime-node/package.json').version } catch { '' }" 2>/dev/null || true)"
if [[ "$installed" != "$ORT_VERSION" ]]; then
  command -v npm >/dev/null 2>&1 || die "'npm' not found in PATH (needed to install onnxruntime-node)"
  log "installing onnxruntime-node@$ORT_VERSION into $ORT_DIR (npm install --ignore-scripts)"
  mkdir -p "$ORT_DIR" || die "cannot create $ORT_DIR"
  cat >"$ORT_DIR/package.json" <<EOF
{ "name": "qdeploy-ort-reference", "private": true, "dependencies": { "onnxruntime-node": "$ORT_VERSION" } }
EOF
  if ! (cd "$ORT_DIR" && npm install --ignore-scripts --no-audit --no-fund --omit=dev --loglevel=error >npm-install.log 2>&1); then
    cat "$ORT_DIR/npm-install.log" >&2 || true
    die "npm install onnxruntime-node@$ORT_VERSION failed (is the npm registry reachable? see the log above)"
  fi
fi

# The CPU binary for this platform must be inside the package (we skipped its install script).
if ! node -e "require('$ORT_DIR/node_modules/onnxruntime-node')" 2>"$ORT_DIR/load-error.log"; then
  cat "$ORT_DIR/load-error.log" >&2
  die "onnxruntime-node@$ORT_VERSION does not load on $(node -p 'process.platform + "-" + process.arch') (no prebuilt CPU binary?)"
fi

log "running ONNX Runtime $ORT_VERSION -> $CACHE_DIR/refs"
node "$HERE/ort_reference.mjs" --models "$CACHE_DIR" --ort "$ORT_DIR" --out "$CACHE_DIR/refs" "$@" ||
  die "ort_reference.mjs failed"
log "done: $(find "$CACHE_DIR/refs" -mindepth 1 -maxdepth 1 -type d -printf '%f ')"
