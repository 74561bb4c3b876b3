#!/usr/bin/env bash
# Installs every Debian 12 package claimguard needs to build, test and benchmark.
# Idempotent: installs only what is missing. Run as root.
set -euo pipefail

PACKAGES=(
  build-essential cmake g++ ninja-build ccache pkg-config git ca-certificates
  libboost1.81-all-dev libssl-dev zlib1g-dev
  libyaml-cpp-dev libhiredis-dev libmariadb-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  clang-14 libclang-rt-14-dev clang-format
  mariadb-server mariadb-client redis-server redis-tools
  mariadb-test golang-go golang-github-go-sql-driver-mysql-dev
  sysbench haproxy
  python3 python3-pymysql python3-yaml
  openjdk-17-jdk-headless libmariadb-java
  # tests/apps (the app zoo): Node, Python ORMs, Hibernate 3 + c3p0, Go database/sql
  nodejs python3-sqlalchemy python3-django python3-mysqldb
  libhibernate3-java libc3p0-java libjavassist-java
  golang-go golang-github-go-sql-driver-mysql-dev
  procps iproute2 netcat-openbsd curl unzip
  # scripts/soak.sh: TCP RST and DROP on the sidecars' links, in a network namespace
  iptables
  # tests/observability: promtool (check rules, test rules) for config/alerts
  prometheus
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# npm: Debian's package, unless the nodejs installed already brings its own (NodeSource's conflicts with it).
if ! command -v npm >/dev/null 2>&1 && ! dpkg-query -W -f='${Status}' npm 2>/dev/null | grep -q "install ok installed"; then
  missing+=(npm)
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  # Do not let the package start a system-wide mariadb/redis: tests start their own.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The app zoo's Node libraries, exactly as tests/apps/node/package-lock.json pins them (test fixtures only).
zoo_node="$(dirname "$0")/../tests/apps/node"
if [ ! -f "$zoo_node/node_modules/.package-lock.json" ] ||
   [ "$zoo_node/package-lock.json" -nt "$zoo_node/node_modules/.package-lock.json" ]; then
  echo "setup: npm ci in tests/apps/node"
  (cd "$zoo_node" && npm ci --no-audit --no-fund)
fi
