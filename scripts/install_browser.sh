#!/usr/bin/env bash
# Headless Chromium + ChromeDriver from Debian for the leaderboard's browser test.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then echo "run as root to apt-get install chromium chromium-driver"; exit 1; fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq chromium chromium-driver >/dev/null
