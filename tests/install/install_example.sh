#!/bin/sh
# `cmake --install` into a temporary prefix; examples/detect built against it with find_package(qdeploy), and again
# with pkg-config's flags; both run on the shipped detector and a sample image on the CPU, and their detections must
# be `qdeploy detect`'s. Usage: install_example.sh BUILD_DIR SOURCE_DIR QDEPLOY_CLI
set -eu
B=$1
S=$2
Q=$3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cmake --install "$B" --prefix "$T/prefix" >/dev/null
gen=""
command -v ninja >/dev/null && gen="-G Ninja"
# shellcheck disable=SC2086 # gen is empty or two words
cmake -S "$S/examples/detect" -B "$T/build" $gen -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$T/prefix" >"$T/log" 2>&1 ||
  { cat "$T/log"; exit 1; }
cmake --build "$T/build" >"$T/log" 2>&1 || { cat "$T/log"; exit 1; }

M=$S/models/yolov5n_fmnist_det.onnx
I=$S/models/samples/000001.jpg
"$T/build/detect" "$M" "$I" >"$T/example.txt"
cat "$T/example.txt"
"$Q" detect "$M" "$I" --out "$T/cli" >"$T/cli.txt"
grep '\[' "$T/example.txt" | sed 's/^ *//' >"$T/example_boxes.txt" || true
grep '\[' "$T/cli.txt" | sed 's/^ *//' >"$T/cli_boxes.txt" || true
if [ ! -s "$T/example_boxes.txt" ]; then
  echo "FAIL: the example printed no detections"
  exit 1
fi
diff "$T/cli_boxes.txt" "$T/example_boxes.txt" || { echo "FAIL: the example's detections are not qdeploy detect's"; exit 1; }

pc=$(dirname "$(find "$T/prefix" -name qdeploy.pc)")
flags=$(PKG_CONFIG_PATH=$pc pkg-config --cflags --libs qdeploy)
# shellcheck disable=SC2086 # flags are words
c++ -std=c++17 -O1 "$S/examples/detect/main.cpp" -o "$T/detect_pc" $flags || { echo "FAIL: pkg-config flags: $flags"; exit 1; }
"$T/detect_pc" "$M" "$I" | diff "$T/example.txt" - || { echo "FAIL: the pkg-config build differs"; exit 1; }
echo "installed package: find_package and pkg-config builds of examples/detect agree with qdeploy detect"
