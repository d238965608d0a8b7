#!/usr/bin/env bash
# The system packages `make test` needs beyond Python, in one place (the Makefile's dev set-up and .ci/run call it):
# Chromium drives the browser tests and prints the PDF, chromedriver comes with it, bubblewrap sandboxes the graded
# submissions, npm installs the pinned axe-core. Only what is missing is named: a Node.js from elsewhere is kept
# (Debian's nodejs package conflicts with it). Root on Debian/Ubuntu installs them; anyone else gets one line with
# the command to run, and exit status 1.
set -euo pipefail

need=()
command -v chromium > /dev/null || need+=(chromium)
command -v chromedriver > /dev/null || need+=(chromium-driver)
command -v bwrap > /dev/null || need+=(bubblewrap)
command -v npm > /dev/null || need+=(nodejs npm)
[ ${#need[@]} -eq 0 ] && exit 0

debian=false
if [ -r "${OS_RELEASE:-/etc/os-release}" ] && command -v apt-get > /dev/null; then
  # shellcheck disable=SC1090
  . "${OS_RELEASE:-/etc/os-release}"
  [[ " ${ID:-} ${ID_LIKE:-} " =~ \ (debian|ubuntu)\  ]] && debian=true
fi
if $debian && [ "$(id -u)" = 0 ]; then
  echo "make: installing the system packages the tests need: ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" > /dev/null
  exit 0
fi
if $debian; then
  echo "make: the tests need ${need[*]}: run \`sudo apt-get update && sudo apt-get install -y ${need[*]}\`, then make test again"
else
  echo "make: the tests need ${need[*]} (Debian's package names): install them with your system's package manager, then make test again"
fi
exit 1
