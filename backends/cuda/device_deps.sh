#!/usr/bin/env bash
# Fetches, here (where Debian's registry is reachable), the Debian packages Tessera builds against
# that a GPU machine's image lacks, as .deb files in .devdeps/ (git-ignored). A GPU machine can
# reach nothing, so the device check carries this folder (device `run` with carry [".devdeps"])
# and device_check.sh unpacks it into a private prefix; nothing is installed there.
#   bash backends/cuda/device_deps.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
PACKAGES=(libfmt-dev libfmt9 libboost1.74-dev nlohmann-json3-dev libgtest-dev libgmock-dev libdnnl-dev libdnnl2
          libsleef-dev libsleef3
          ocl-icd-opencl-dev ocl-icd-libopencl1 opencl-c-headers opencl-clhpp-headers)  # dnnl-config.cmake wants OpenCL
mkdir -p .devdeps
cd .devdeps
rm -f ./*.deb
apt-get download "${PACKAGES[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true
ls ./*.deb >/dev/null
echo "device_deps: $(ls ./*.deb | wc -l) packages, $(du -sh . | cut -f1) in .devdeps/"
