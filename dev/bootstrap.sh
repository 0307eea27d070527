#!/usr/bin/env bash
# Install what dtnkit needs on a Debian/Ubuntu host (as root) and make ./.venv.
#   dev/bootstrap.sh          runtime and the report extra (matplotlib: `dtnkit sweep report`, the
#                             README tour's last step)
#   dev/bootstrap.sh test     runtime + the extras test (pytest, hypothesis, ansible,
#                             pyroute2), lint (ruff, mypy, import-linter), report and
#                             postgresql, and the interop peers (XRootD 5.5 with XrdHttp/TPC,
#                             gfal2 + gfal-copy, davix, curl, rclone) that the mover's tests
#                             and benchmarks run against, and Prometheus + node_exporter (the
#                             monitoring tests, `python -m bench exporter`)
set -euo pipefail
cd "$(dirname "$0")/.."

debs=(iproute2 ethtool procps iptables iputils-ping iperf3 fio openssl util-linux python3 python3-venv)
if [ "${1:-}" = "test" ]; then
  debs+=(curl xrootd-server xrootd-server-plugins xrootd-plugins xrootd-client
         gfal2 gfal2-plugin-http gfal2-plugin-file gfal2-util-scripts davix rclone
         prometheus prometheus-node-exporter chromium  # promtool, a real Prometheus, node_exporter; headless page test
         postgresql openssh-server netcat-openbsd)      # the fleet tests: a results store, sshd per namespace
fi
missing=()
for pkg in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "dev/bootstrap.sh: needs root to install ${missing[*]} (run it with sudo)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # the test servers (sshd, postgresql) are started by the tests themselves, in namespaces or
  # on temporary directories: never as system services listening on the host's addresses
  guard=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
    guard=/usr/sbin/policy-rc.d
  fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  [ -z "$guard" ] || rm -f "$guard"
fi

if [ ! -x .venv/bin/python ]; then
  # the distribution's python3 (installed above; built with PGO/LTO, as on a site's DTN),
  # not whichever python3 comes first on PATH (a pyenv build can start twice as slowly)
  py=/usr/bin/python3
  [ -x "$py" ] || py=python3
  "$py" -m venv .venv
fi
target='.[report]'
[ "${1:-}" = "test" ] && target='.[test,lint,report,postgresql]'
# quiet unless it fails: then show pip's own words
if ! .venv/bin/python -m pip install -q -e "$target" >.venv/pip-install.log 2>&1; then
  cat .venv/pip-install.log >&2
  echo "dev/bootstrap.sh: pip install failed (log: .venv/pip-install.log)" >&2
  exit 1
fi
