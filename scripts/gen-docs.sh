#!/usr/bin/env bash
# Regenerates the docs that come from the code: docs/operators.md (op registry), docs/cli.md (the commands' CLI11
# definitions), docs/conformance.md (node tests).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
"$BUILD_DIR/qdeploy" ops --markdown > docs/operators.md.tmp && mv docs/operators.md.tmp docs/operators.md
"$BUILD_DIR/qdeploy" help-markdown > docs/cli.md.tmp && mv docs/cli.md.tmp docs/cli.md
"$BUILD_DIR/tests/conformance/qdeploy_conformance" /usr/share/libonnx-testdata/data/node \
  --suite "Debian's libonnx-testdata (onnx 1.12, opsets up to 17)" --report docs/conformance.md > /dev/null || true
# onnx 1.23's node tests (opsets up to 28), from the carried tarball; the tests that pass become the CI's expectation.
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
tar -C "$stage" -xJf tests/conformance/onnx-1.23-node-tests.tar.xz
"$BUILD_DIR/tests/conformance/qdeploy_conformance" "$stage/node" \
  --suite "onnx 1.23 (opsets up to 28; tests/conformance/onnx-1.23-node-tests.tar.xz)" --report docs/conformance-onnx-1.23.md > /dev/null || true
sed -i "s|$stage/node|NODE_DIR|g" docs/conformance-onnx-1.23.md
grep '^| test_.* | pass |' docs/conformance-onnx-1.23.md | cut -d' ' -f2 > tests/conformance/onnx-1.23-expected-pass.txt
echo "wrote docs/operators.md docs/cli.md docs/conformance.md docs/conformance-onnx-1.23.md tests/conformance/onnx-1.23-expected-pass.txt"
