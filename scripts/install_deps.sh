#!/usr/bin/env bash
# Installs the Debian packages sfvit needs to build, test and run its main job.
# Idempotent: packages already present are skipped quickly.
set -euo pipefail
pkgs=(build-essential meson ninja-build pkg-config libopenblas-dev libpng-dev zlib1g-dev
      libjpeg62-turbo-dev libyaml-dev libcjson-dev dataset-fashion-mnist
      libopenmpi-dev openmpi-bin
      libdnnl-dev  # oneDNN: bf16 products (train.precision: bf16), SFVIT_GEMM=onednn
      python3-yaml)  # python3-yaml: tests/test_config_yaml.sh reads the resolved config with PyYAML
pkgs+=("$@")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
