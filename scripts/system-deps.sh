#!/usr/bin/env bash
# Installs the system packages the test suite needs, when they are missing:
# PostgreSQL (the postgres dialect is checked against a real server's parser) and
# Redis (the shared tier of the mask cache is tested against a real server).
# Coq is installed by proofs/check.sh itself. Idempotent; needs root (as CI is).
set -euo pipefail
if ! compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" > /dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql > /dev/null
fi
if ! command -v redis-server > /dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server > /dev/null
fi
