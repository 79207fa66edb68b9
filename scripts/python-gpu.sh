#!/usr/bin/env bash
# The Python module for the GPU machine, whose Python (3.12, with torch) is not Debian's and which has no package
# registry: the libraries are built here, the module's three binding files are compiled there against its Python.
#   scripts/python-gpu.sh pack [BUILD_DIR]   here: after a CUDA build with the Python module on (position-independent
#                                            libraries), e.g. BUILD_DIR=build-gpu-py scripts/build.sh -DQD_CUDA=ON
#                                            -DQD_CUDA_ARCH=90a -DQD_PYTHON=ON -DQD_TESTS=OFF
#                                            TARGETS="qdeploy_python"; packs them with the Debian libraries they
#                                            need into .device/py/ (git-ignored; carry .device)
#   scripts/python-gpu.sh build              there: compiles python/bindings/ with `python3 -m pybind11 --includes`
#                                            and links build-gpu-py/python/qdeploy/_native*.so
#   scripts/python-gpu.sh test [PYTEST ARGS] there: the Python tests with that module (the GPU ones included)
# Protobuf, libjpeg and libpng go as shared libraries (Debian's static ones are not position-independent), found
# through the module's rpath; OpenBLAS, libgfortran and libstdc++'s own code are linked in.
set -euo pipefail
cd "$(dirname "$0")/.."
P=.device/py
OUT=build-gpu-py/python/qdeploy
case "${1:-}" in
  pack)
    B=${2:-build-gpu-py}
    [ -f "$B/libqdeploy_cuda.a" ] || { echo "error: $B has no CUDA build (see the usage above)" >&2; exit 2; }
    rm -rf $P && mkdir -p $P/lib
    cp "$B"/libqdeploy_frontend.a "$B"/libqdeploy_cuda.a "$B"/libqdeploy_lib.a "$B"/libqd_onnx_proto.a $P/lib/
    cp /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.a /usr/lib/gcc/x86_64-linux-gnu/12/libgfortran.a \
      /usr/lib/gcc/x86_64-linux-gnu/12/libquadmath.a $P/lib/
    for so in libprotobuf.so.32 libjpeg.so.62 libpng16.so.16; do cp -L "/usr/lib/x86_64-linux-gnu/$so" $P/lib/; done
    tar -C $P -cf - lib | xz -T1 -6 > $P/lib.tar.xz && rm -rf $P/lib
    echo "packed $(du -h $P/lib.tar.xz | cut -f1) into $P/lib.tar.xz"
    ;;
  build)
    PY=${PYTHON:-python3}
    mkdir -p $P/lib $OUT /tmp/qd-py-obj
    [ -f $P/lib/libqdeploy_cuda.a ] || xz -dc $P/lib.tar.xz | tar -C $P -xf -
    ext=$($PY -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
    inc=$($PY -m pybind11 --includes)
    cuda=${CUDA_HOME:-/usr/local/cuda}
    objs=()
    for f in python/bindings/*.cpp; do
      o=/tmp/qd-py-obj/$(basename "$f" .cpp).o
      # shellcheck disable=SC2086 # inc is a list of flags
      g++ -std=c++17 -O2 -fPIC -fvisibility=hidden $inc -Iinclude -c "$f" -o "$o" &
      objs+=("$o")
    done
    wait
    lib=$(cd $P/lib && pwd)
    g++ -shared -o "$OUT/_native$ext" "${objs[@]}" -Wl,--start-group "$lib/libqdeploy_frontend.a" \
      "$lib/libqdeploy_cuda.a" "$lib/libqdeploy_lib.a" "$lib/libqd_onnx_proto.a" -Wl,--end-group \
      "$lib/libprotobuf.so.32" "$lib/libjpeg.so.62" "$lib/libpng16.so.16" "$lib/libopenblas.a" "$lib/libgfortran.a" \
      "$lib/libquadmath.a" -L"$cuda/lib64" -lcudart_static -lrt -lz -lpthread -ldl -lm -static-libgcc \
      -Wl,-rpath,"$lib"
    echo "built $OUT/_native$ext"
    ;;
  test)
    shift
    QDEPLOY_BUILD_DIR=build-gpu-py PYTHONDONTWRITEBYTECODE=1 ${PYTHON:-python3} -m pytest -q -p no:cacheprovider \
      tests/python/test_native_gpu.py tests/python/test_native.py tests/python/test_triton.py "$@"
    ;;
  *)
    sed -n '2,14p' "$0" >&2
    exit 2
    ;;
esac
