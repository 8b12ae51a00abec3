#!/usr/bin/env bash
# Installs what Tessera builds against, from Debian's packages, and the Python build and test
# tools from PyPI. Idempotent: does nothing when everything is present.
set -euo pipefail
PACKAGES=(cmake ninja-build g++ ccache binutils python3 python3-yaml libfmt-dev libboost-dev nlohmann-json3-dev
          libdnnl-dev libsleef-dev liblapacke-dev libkissfft-dev libgtest-dev libgmock-dev libbenchmark-dev
          libzip-dev libssl-dev libxxhash-dev  # the export runtime: archives (zip), checksums (XXH3; SHA-256 of format 1)
          libgloo-dev iproute2  # the gloo process-group backend; ip netns for the two-node test
          clang libc++-dev libc++abi-dev libclang-rt-14-dev  # SDK check (clang+libc++) and libFuzzer
          hipcc libamdhip64-dev)  # the ROCm plugin, compiled (gfx90a, gfx940) from the CUDA sources
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "bootstrap: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# The python3 on PATH builds the Python package and runs its tests (pytest-xdist: -n 2).
# safetensors: interop oracle; scikit-learn (its bundled digits) and tqdm: the training demo;
# matplotlib: the plot of benchmarks/run.py; onnx and onnxruntime: ts.onnx's checker and oracle.
PY_PACKAGES=(pyyaml scikit-build-core pybind11 numpy pytest pytest-xdist hypothesis safetensors scikit-learn tqdm matplotlib onnx onnxruntime)
python3 -c "import yaml, scikit_build_core, pybind11, numpy, pytest, xdist, hypothesis, safetensors, sklearn, tqdm, matplotlib, onnx, onnxruntime" 2>/dev/null ||
  python3 -m pip install -q --disable-pip-version-check "${PY_PACKAGES[@]}"
