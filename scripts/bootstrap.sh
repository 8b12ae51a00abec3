#!/usr/bin/env bash
# Installs what Tessera builds against, from Debian's packages (and PyYAML from PyPI when the
# python3 on PATH lacks it). Idempotent: does nothing when everything is present.
set -euo pipefail
PACKAGES=(cmake ninja-build g++ ccache binutils python3 python3-yaml libfmt-dev libboost-dev
          libdnnl-dev libgtest-dev libgmock-dev libbenchmark-dev)
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
python3 -c "import yaml" 2>/dev/null || python3 -m pip install -q pyyaml
