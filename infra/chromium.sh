#!/usr/bin/env bash
# Install Debian's Chromium and its ChromeDriver (packages chromium, chromium-driver) when
# /usr/bin/chromium or /usr/bin/chromedriver is missing. The report's browser test
# (tests/test_report.py) and docs/img/make_report_screenshot.py drive them with Selenium; both
# come from one Debian source package, so driver and browser versions always match and nothing
# is downloaded at test time.
# Runs as root (CI and the developers' machines); elsewhere through `sudo -n` if it can.
set -euo pipefail

if [[ -x /usr/bin/chromium && -x /usr/bin/chromedriver ]]; then
  echo "chromium already installed: $(/usr/bin/chromium --version 2>/dev/null || echo /usr/bin/chromium)"
  exit 0
fi

if [[ "$(id -u)" == "0" ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "error: installing chromium needs root (apt-get install chromium chromium-driver)" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -q >&2
"${as_root[@]}" apt-get install -y -q --no-install-recommends chromium chromium-driver >&2

for bin in /usr/bin/chromium /usr/bin/chromedriver; do
  [[ -x "$bin" ]] || { echo "error: $bin missing after apt-get install" >&2; exit 1; }
done
echo "chromium installed: $(/usr/bin/chromium --version 2>/dev/null || echo /usr/bin/chromium)"
