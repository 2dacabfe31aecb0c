#!/usr/bin/env bash
# System packages ackfold needs beyond Python: a JDK 17+ for Spark, Maven to fetch the jars,
# npm (alone with --npm) to fetch the Compose schema that tests/deploy validates against,
# with --emulators npm and Go for the local stores' emulators (Azurite, fake-gcs-server,
# versitygw),
# and with --browser Debian's Chromium for the browser tests (Playwright drives it; it
# never downloads a browser of its own). Installs only what is missing (Debian's packages,
# needs root), so it is safe to re-run.
set -euo pipefail
missing=()
if [ "${1:-}" = "--browser" ]; then
  command -v chromium >/dev/null || missing+=(chromium)
elif [ "${1:-}" = "--npm" ]; then
  command -v npm >/dev/null || missing+=(npm)
elif [ "${1:-}" = "--emulators" ]; then
  # Azurite runs on Node (npm brings it); fake-gcs-server and versitygw are built with Go
  # 1.25 or newer, which Debian 12 does not package (its golang-go is 1.19): install Go
  # from go.dev.
  command -v npm >/dev/null || missing+=(npm)
  if ! command -v go >/dev/null; then
    echo "go is not on PATH: install Go 1.25 or newer (https://go.dev/doc/install) and re-run" >&2
    exit 1
  fi
else
  if ! command -v java >/dev/null || ! java -version 2>&1 | grep -qE 'version "(1[7-9]|2[0-9])'; then
    missing+=(openjdk-17-jdk-headless)
  fi
  command -v mvn >/dev/null || missing+=(maven)
  command -v npm >/dev/null || missing+=(npm)
  command -v python3.11 >/dev/null || [ -n "${PYTHON:-}" ] || missing+=(python3.11 python3.11-venv)
fi
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing system packages: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "not root: install them yourself (apt-get install ${missing[*]}) and re-run" >&2
  exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
