#!/usr/bin/env bash
# The whole test suite (the README's test command; .ci/run calls exactly this).
# Installs what it needs, then: format check, clippy with warnings as errors, every test.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

if [[ ! -d ../shared/vectors ]]; then
  echo "test: ../shared/vectors not found beside the repository (the wire tests need it)" >&2
  exit 1
fi

cargo fmt --all -- --check
cargo clippy --all-targets -- -D warnings
RUSTFLAGS="${RUSTFLAGS:-} -D warnings" cargo build --all-targets
cargo test --all-targets
