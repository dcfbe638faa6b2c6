#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit, integration and
# end-to-end tests. Installs what it needs on a fresh Debian 12 machine.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
. "$repo/scripts/lib.sh"

base_packages
sandbox_packages
sandbox_user
git_server_packages
postgres_packages
container_packages
ensure_rust

testdata="$repo/../shared/testdata"
if [ ! -d "$testdata" ]; then
  echo "tests/run.sh: the shared test data is missing at $testdata;" >&2
  echo "the suite checks Forgehand against real forge payloads kept there (see tests/README.md)." >&2
  exit 1
fi

echo "==> guest rootfs (images/build-rootfs)"
FORGEHAND_TEST_ROOTFS="$(guest_rootfs)"
export FORGEHAND_TEST_ROOTFS

# tests/tests/container.rs builds the image offline from this base;
# deploy_manifests.rs validates the Kubernetes manifests with it.
echo "==> container image base (deploy/image.sh base) and kubernetes-validate"
container_base
k8s_validator >/dev/null

cd "$repo"
echo "==> cargo fmt --check"
cargo fmt --all -- --check
echo "==> cargo clippy"
# --all-features: the microvm backend is compiled and its configuration
# tests run here, though no microVM boots on machines without real KVM.
cargo clippy --workspace --all-targets --all-features --locked -- -D warnings
echo "==> cargo test"
# A snapshot that differs fails the test and leaves no file in the checkout
# (insta would otherwise write .pending-snap files beside the sources).
export INSTA_UPDATE=no
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
set +e
cargo test --workspace --all-features --locked 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "${FORGEHAND_TEST_MICROVM:-}" = 1 ] && [ "$status" = 0 ]; then
  # Where KVM boots a guest: the conformance suite on microVMs too.
  echo "==> sandbox conformance on microVMs (FORGEHAND_TEST_MICROVM=1)"
  cargo test -p forgehand-sandbox --features microvm --locked --test conformance \
    -- --ignored microvm:: 2>&1 | tee -a "$log"
  status=${PIPESTATUS[0]}
fi
if [ "$status" = 0 ]; then
  # The queue's tests again, on PostgreSQL (the store's conformance suite
  # runs on both stores in the workspace run above).
  echo "==> the queue's tests on PostgreSQL"
  FORGEHAND_TEST_STORE=postgres cargo test --locked -p forgehand-queue --tests 2>&1 | tee -a "$log"
  status=${PIPESTATUS[0]}
fi
if [ "$status" = 0 ]; then
  # The default feature set is what the quick start and the container
  # build: compiled and linted too, and the first-run suite and the
  # service's own tests run on that very binary.
  echo "==> the default feature set: clippy, the service's tests and the first-run suite"
  cargo clippy --workspace --all-targets --locked -- -D warnings 2>&1 | tee -a "$log"
  status=${PIPESTATUS[0]}
  if [ "$status" = 0 ]; then
    cargo test --locked -p forgehand-bot 2>&1 | tee -a "$log"
    status=${PIPESTATUS[0]}
  fi
  if [ "$status" = 0 ]; then
    cargo test --locked -p forgehand-tests --test first_run 2>&1 | tee -a "$log"
    status=${PIPESTATUS[0]}
  fi
fi
set -e
# One closing line for the whole run: cargo prints one per test binary.
grep -E '^test result: ' "$log" | awk '{p += $4; f += $6} END {printf "tests: %d passed, %d failed\n", p, f}'
exit "$status"
