#!/usr/bin/env bash
# Builds Forgehand and starts `forgehand serve` on embedded defaults: a
# SQLite file beside ./forgehand.toml. On the first run it writes that
# file with fresh random secrets and prints what to enter on the forge.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
. "$repo/scripts/lib.sh"

base_packages
sandbox_packages
sandbox_user
host_file_table
ensure_rust

cd "$repo"
echo "==> building forgehand (release)"
cargo build --release --locked --bin forgehand
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
  cat <<MSG
==> wrote $config (mode 600) with fresh secrets:
    webhook secret (GitHub and Gitea): $secret
    operator API token:                $token
    Point a webhook at http://<this host>:8080/webhooks/github (or /webhooks/gitea)
    with content type application/json and that secret.
MSG
fi

echo "==> guest rootfs for the sandbox (images/build-rootfs; reused when up to date)"
rootfs="$(guest_rootfs)"
export FORGEHAND_SANDBOX__ROOTFS="${FORGEHAND_SANDBOX__ROOTFS:-$rootfs}"

"$bin" check-config --config "$config" >/dev/null
"$bin" doctor --config "$config" || true
echo "==> starting forgehand serve (Ctrl-C stops it)"
exec "$bin" serve --config "$config"
