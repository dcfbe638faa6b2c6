#!/usr/bin/env bash
# Builds Forgehand and starts `forgehand serve` on embedded defaults: a
# SQLite file beside ./forgehand.toml. On the first run it writes that
# file with fresh random secrets and prints what to enter on the forge.
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

config="${FORGEHAND_CONFIG:-$repo/forgehand.toml}"
if [ ! -f "$config" ]; then
  # od reads exactly 20 bytes: no pipe is cut short (pipefail would end the script).
  secret="$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')"
  token="$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')"
  umask 077
  sed -e "s|^# webhook_secret = \[\"current-secret\", \"previous-secret\"\]|webhook_secret = [\"$secret\"]|" \
      -e "s|^# webhook_secret = \"secret-a,secret-b\"|webhook_secret = [\"$secret\"]|" \
      -e "s|^# token = \"change-me\"|token = \"$token\"|" \
      deploy/forgehand.example.toml >"$config"
  # Environments' setup reaches only the registries this host's own
  # package managers use (review them in the file): no list is built in.
  { echo; "$bin" env hosts; } >>"$config"
  cat <<MSG
==> wrote $config (mode 600) with fresh secrets:
    webhook secret (GitHub and Gitea): $secret
    operator API token:                $token
    environment.allow_hosts:           the registries this host's pip, npm and apt use
                                       (forgehand env hosts; review them there)
    Then set server.public_url there (the address your forge reaches) and run
      $bin setup github            (creates a GitHub App; or --repo OWNER/NAME with a token)
      $bin setup gitea --repo OWNER/NAME
    or point a webhook at http://<this host>:8080/webhooks/github (or /webhooks/gitea)
    with content type application/json and that secret.
MSG
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
