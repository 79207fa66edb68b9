#!/usr/bin/env bash
# Regenerates the docs that come from the code: docs/operators.md (op registry), docs/conformance.md (node tests).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
"$BUILD_DIR/qdeploy" ops --markdown > docs/operators.md.tmp && mv docs/operators.md.tmp docs/operators.md
"$BUILD_DIR/tests/conformance/qdeploy_conformance" /usr/share/libonnx-testdata/data/node --report docs/conformance.md > /dev/null || true
echo "wrote docs/operators.md docs/conformance.md"
