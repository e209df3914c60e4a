#!/usr/bin/env bash
# Installs what rkmojo needs to build and test on Debian 12, only what is
# missing: the C toolchain, Debian's libraries (cJSON, xxHash, libmicrohttpd,
# liburing, PCRE2, libedit, libcurl, libpng, libjpeg-turbo, libwebp), clang for the fuzzers, the aarch64 cross toolchain with the
# arm64 libraries (multiarch) and qemu-user for the ARM tests, and the npm
# reference packages of tests/js (with llama.cpp's prebuilt library on
# x86-64), Chromium for the chat page's test and nginx for the several-
# instances recipe's test (Debian's package starts its default site where
# services may start; the test runs its own instance). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

host_pkgs="build-essential clang jq libclang-rt-14-dev libcjson-dev libxxhash-dev libmicrohttpd-dev liburing-dev libpcre2-dev
           libedit-dev libcurl4-openssl-dev libpng-dev libjpeg62-turbo-dev libwebp-dev
           gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user curl ca-certificates bc time chromium nginx"
# Node.js and npm: Debian's packages unless a node/npm is already installed
command -v node > /dev/null && command -v npm > /dev/null || host_pkgs="$host_pkgs nodejs npm"
arm_pkgs="libcjson-dev:arm64 libmicrohttpd-dev:arm64 liburing-dev:arm64 libpcre2-dev:arm64 libedit-dev:arm64
          libcurl4-openssl-dev:arm64 libpng-dev:arm64 libjpeg62-turbo-dev:arm64 libwebp-dev:arm64"

missing=()
for p in $host_pkgs $arm_pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then $SUDO dpkg --add-architecture arm64; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# llama.cpp's prebuilt library and its multimodal binding (optional
# packages: x86-64 glibc only)
need_llama=0
for d in @node-llama-cpp/linux-x64 @fugood/node-llama-linux-x64; do
  [ "$(uname -m)" = x86_64 ] && [ ! -d "tests/js/node_modules/$d" ] && need_llama=1
done
# every dependency of tests/js/package.json present?
need_npm=$need_llama
for d in $(node -e 'console.log(Object.keys(require("./tests/js/package.json").dependencies).join(" "))'); do
  [ -d "tests/js/node_modules/$d" ] || need_npm=1
done
if [ $need_npm = 1 ]; then
  echo "setup: installing the npm reference packages (tests/js)"
  (cd tests/js && npm install --no-audit --no-fund --loglevel=error)
fi
echo "setup: ok"
