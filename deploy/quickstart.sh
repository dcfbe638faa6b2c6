#!/usr/bin/env bash
# Builds Forgehand and starts `forgehand serve` on embedded defaults. On
# the first run it writes /etc/forgehand/forgehand.toml (or the file
# $FORGEHAND_CONFIG names) with fresh random secrets and its data in
# /var/lib/forgehand, and prints what to enter on the forge; every
# command (`run`, `doctor`, `env`, `serve`) reads that file.
#
# The sandbox backend is what production would use here: microVMs where
# a trial microVM boots (built with the `microvm` feature), the namespace
# backend otherwise. FORGEHAND_SANDBOX__BACKEND=namespace skips the probe.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
. "$repo/scripts/lib.sh"

base_packages
sandbox_packages
sandbox_user
host_file_table
ensure_rust

cd "$repo"
echo "==> guest rootfs for the sandbox (images/build-rootfs; reused when up to date)"
rootfs="$(guest_rootfs)"
export FORGEHAND_SANDBOX__ROOTFS="${FORGEHAND_SANDBOX__ROOTFS:-$rootfs}"

# microVMs need KVM and microsandbox's runtime pieces; whether a guest
# boots is then decided by booting one (below), not by /dev/kvm alone.
requested="${FORGEHAND_SANDBOX__BACKEND:-}"
features=()
if [ "$requested" != namespace ]; then
  if [ ! -e /dev/kvm ]; then
    echo "==> no /dev/kvm: the namespace sandbox backend"
  elif microvm_pieces; then
    features=(--features forgehand-bot/microvm)
  else
    echo "==> /dev/kvm is here but microsandbox's runtime pieces are not (above): the namespace"
    echo "    backend for now; with them in place, run the quick start again to try microVMs"
  fi
fi

echo "==> building forgehand (release${features[*]:+, ${features[*]}})"
cargo build --release --locked --bin forgehand "${features[@]}"
bin="${CARGO_TARGET_DIR:-$repo/target}/release/forgehand"

# Where every command finds it: the system file, unless the operator
# named another (then `export FORGEHAND_CONFIG=...` for the other commands).
config="${FORGEHAND_CONFIG:-/etc/forgehand/forgehand.toml}"
data="${FORGEHAND_DATA_DIR:-/var/lib/forgehand}"
if [ ! -f "$config" ] && [ -f "$repo/forgehand.toml" ]; then
  # An earlier quick start wrote its file into the checkout, where only
  # `serve` read it: it moves to where every command finds it.
  echo "==> moving $repo/forgehand.toml (an earlier quick start's) to $config"
  as_root install -D -m 600 "$repo/forgehand.toml" "$config" && rm -f "$repo/forgehand.toml"
fi
write_config "$bin" "$config" "$data"
if [ "$config" != /etc/forgehand/forgehand.toml ]; then
  echo "==> the configuration is $config: export FORGEHAND_CONFIG=$config for the other commands"
fi

# An explicit FORGEHAND_SANDBOX__BACKEND stands (microvm then fails
# closed where none boots); otherwise the probe decides.
backend=namespace
if [ ${#features[@]} -gt 0 ]; then
  echo "==> boot probe: a trial microVM"
  if microvm_boots "$bin" --config "$config"; then
    echo "    a microVM booted: jobs run in microVMs"
    backend=microvm
  else
    echo "    no microVM boots here (above): the namespace backend"
  fi
fi
export FORGEHAND_SANDBOX__BACKEND="${requested:-$backend}"

"$bin" check-config --config "$config" >/dev/null
"$bin" doctor --config "$config" || true
echo "==> starting forgehand serve (Ctrl-C stops it)"
exec "$bin" serve --config "$config"
