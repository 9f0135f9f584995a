#!/usr/bin/env bash
# The dashboard and alert tests run a real Prometheus and promtool (Debian's `prometheus` package).
# Installs it when missing; needs root (as on CI) or an existing install.
set -euo pipefail
if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != "0" ]; then
  echo "promtool/prometheus not found: run 'sudo apt-get install -y prometheus' first" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# policy-rc.d keeps the package from starting a system Prometheus; the tests start their own on loopback.
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d.rag-confidence
chmod +x /usr/sbin/policy-rc.d.rag-confidence
if [ ! -e /usr/sbin/policy-rc.d ]; then cp /usr/sbin/policy-rc.d.rag-confidence /usr/sbin/policy-rc.d; created=1; fi
apt-get install -y -qq --no-install-recommends prometheus >/dev/null
if [ "${created:-0}" = "1" ]; then rm -f /usr/sbin/policy-rc.d; fi
rm -f /usr/sbin/policy-rc.d.rag-confidence
command -v promtool >/dev/null
