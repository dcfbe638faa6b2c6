# Shared by deploy/quickstart.sh and tests/run.sh: install what a fresh
# Debian 12 machine lacks, and nothing when it is already there.

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# apt_install PKG...: installs the packages that are not installed yet.
apt_install() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} = 0 ] && return 0
  echo "==> installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# ensure_rust: cargo with rustfmt and clippy, through rustup when missing.
ensure_rust() {
  if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    echo "==> installing the Rust toolchain with rustup"
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile default
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
}

base_packages() {
  # libssl-dev: git2 (host-side git over HTTPS and SSH) links OpenSSL.
  apt_install ca-certificates curl git build-essential pkg-config libssl-dev openssl
}

# sandbox_packages: what the namespace sandbox backend runs (bubblewrap;
# mkfs.ext4 from e2fsprogs and mount from util-linux for the working
# copies' file systems) and what builds the guest rootfs (debootstrap).
sandbox_packages() {
  apt_install bubblewrap util-linux e2fsprogs mount debootstrap
}

# sandbox_user: the host user the namespace backend runs sandboxes as
# (docs/security.md): an unprivileged system user of their own, never
# root and never the user that runs Forgehand.
sandbox_user() {
  if ! getent passwd forgehand-sandbox >/dev/null; then
    echo "==> creating the system user forgehand-sandbox (sandboxes run as it)"
    as_root useradd --system --user-group --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin forgehand-sandbox
  fi
}

# host_file_table: raises fs.file-max to its maximum, as systemd does at
# boot, where it is lower: files a sandbox maps and closes stay open
# without a descriptor, bounded only by its memory, and past the table's
# size no unprivileged process on the host can open a file. Kept in
# /etc/sysctl.d/60-forgehand.conf.
host_file_table() {
  local max=9223372036854775807 now
  now="$(cat /proc/sys/fs/file-max)"
  if [ "${#now}" -lt "${#max}" ]; then
    echo "==> raising fs.file-max from $now to $max (as systemd does; see docs/security.md)"
    if ! { echo "fs.file-max = $max" | as_root tee /etc/sysctl.d/60-forgehand.conf >/dev/null &&
      as_root sysctl -q -w "fs.file-max=$max"; }; then
      echo "    could not (a container's /proc/sys is read-only): set it on the host; forgehand doctor warns until then" >&2
    fi
  fi
}

# git_server_packages: the real git servers the tests start on 127.0.0.1
# (git http-backend comes with git; sshd with openssh-server).
git_server_packages() {
  apt_install git openssh-server openssh-client
}

# postgres_packages: the PostgreSQL server the store tests start by
# themselves (initdb into a temporary directory, run as an unprivileged
# user: forgehand-store-test-support) and scripts/sqlx-prepare.sh uses.
postgres_packages() {
  apt_install postgresql
}

# guest_rootfs: builds the guest rootfs (or reuses it when up to date) and
# prints its path.
guest_rootfs() {
  local out
  out="$(bash "$repo/images/build-rootfs" --print-default)"
  as_root bash "$repo/images/build-rootfs" "$out" >&2
  echo "$out"
}

# container_packages: podman with runc (crun cannot run the sandbox's
# nested namespaces on every host, these among them) to build and run
# the container image, and docker-compose, which parses
# deploy/compose.yaml in the tests.
container_packages() {
  apt_install podman runc docker-compose
}

# container_base: the offline image build's base (deploy/image.sh base):
# Debian with the runtime's packages, debootstrapped once into a tarball
# cached under /var/cache/forgehand/container-base, imported as
# localhost/forgehand-base:bookworm. No container registry is involved.
container_base() {
  as_root bash "$repo/deploy/image.sh" base
}

# k8s_validator: kubernetes-validate from PyPI, which bundles the
# Kubernetes API's schemas (manifests are checked offline), in a venv of
# its own under /var/cache/forgehand/tools; its path goes to stdout.
K8S_VALIDATE_VERSION=1.37.0
k8s_validator() {
  local venv=/var/cache/forgehand/tools/kubernetes-validate-$K8S_VALIDATE_VERSION
  if [ ! -x "$venv/bin/kubernetes-validate" ]; then
    apt_install python3-venv >&2
    echo "==> installing kubernetes-validate $K8S_VALIDATE_VERSION (PyPI) into $venv" >&2
    as_root /usr/bin/python3 -m venv "$venv" >&2
    as_root "$venv/bin/pip" install -q "kubernetes-validate==$K8S_VALIDATE_VERSION" >&2
  fi
  echo "$venv/bin/kubernetes-validate"
}

# microvm_pieces: whether microsandbox's runtime pieces are here (the
# microvm backend needs them besides KVM); when not, says on stderr what
# is missing and how to get each, and returns 1. Looked for where
# Forgehand looks: FORGEHAND_SANDBOX__*_PATH, microsandbox's MSB_*, else
# ~/.microsandbox.
microvm_pieces() {
  local home="${MSB_HOME:-$HOME/.microsandbox}" missing=0
  local msb="${FORGEHAND_SANDBOX__MSB_PATH:-${MSB_PATH:-$home/bin/msb}}"
  local krunfw="${FORGEHAND_SANDBOX__LIBKRUNFW_PATH:-${MSB_LIBKRUNFW_PATH:-$home/lib/libkrunfw.so.5.6.1}}"
  local agentd="${FORGEHAND_SANDBOX__AGENTD_PATH:-${MSB_AGENTD_PATH:-}}"
  if [ ! -x "$msb" ]; then
    echo "    msb (the microsandbox runtime) is not at $msb: cargo install microsandbox-cli --version 0.7.13 --no-default-features --features net, then set FORGEHAND_SANDBOX__MSB_PATH" >&2
    missing=1
  fi
  if [ ! -f "$krunfw" ]; then
    echo "    libkrunfw (the guest kernel) is not at $krunfw: take libkrunfw.so.5.6.1 from a microsandbox 0.7.13 release, then set FORGEHAND_SANDBOX__LIBKRUNFW_PATH" >&2
    missing=1
  fi
  if [ -z "$agentd" ] || [ ! -x "$agentd" ]; then
    echo "    agentd (the guest agent) is not set: build crate microsandbox-agentd 0.7.13 for x86_64-unknown-linux-musl, then set FORGEHAND_SANDBOX__AGENTD_PATH" >&2
    missing=1
  fi
  return "$missing"
}

# microvm_boots BIN [ARGS...]: the boot probe. `forgehand doctor` with
# sandbox.backend = "microvm" boots a trial microVM from the guest rootfs
# and runs `true` in it; only that shows this host's KVM runs a guest
# (/dev/kvm can be there and boot nothing). Returns 0 when it did; else
# prints doctor's verdict on the microvm backend on stderr.
microvm_boots() {
  local bin="$1" report
  shift
  report="$(FORGEHAND_SANDBOX__BACKEND=microvm "$bin" doctor "$@" 2>&1 || true)"
  if printf '%s\n' "$report" | grep -q '^backend microvm *usable'; then
    return 0
  fi
  printf '%s\n' "$report" | grep '^backend microvm' >&2 || printf '%s\n' "$report" >&2
  return 1
}

# write_config BIN CONFIG DATA_DIR: the quick start's configuration. When
# CONFIG does not exist, writes it (mode 600) from
# deploy/forgehand.example.toml with fresh random secrets, its data (the
# SQLite file, mirrors, working copies, transcripts, environments) under
# DATA_DIR (made, mode 700), and the registries this host's package
# managers use as environment.allow_hosts (`forgehand env hosts`), then
# says what it wrote on stderr; an existing CONFIG is left as it is.
# `forgehand run`, `doctor`, `env` and `serve` all read it when it is
# /etc/forgehand/forgehand.toml (or $FORGEHAND_CONFIG names it).
write_config() {
  local bin="$1" config="$2" data="$3" secret token
  if [ -f "$config" ]; then
    echo "==> $config exists: kept as it is" >&2
    return 0
  fi
  mkdir -p "$(dirname "$config")" "$data"
  chmod 700 "$data"
  # od reads exactly 20 bytes: no pipe is cut short (pipefail would end the script).
  secret="$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')"
  token="$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')"
  (
    umask 077
    sed -e "s|^# webhook_secret = \\[\"current-secret\", \"previous-secret\"\\]|webhook_secret = [\"$secret\"]|" \
        -e "s|^# webhook_secret = \"secret-a,secret-b\"|webhook_secret = [\"$secret\"]|" \
        -e "s|^# token = \"change-me\"|token = \"$token\"|" \
        -e "s|^# data_dir = .*|data_dir = \"$data\"|" \
        -e "s|^url = \"sqlite://forgehand.db\"|url = \"sqlite://$data/forgehand.db\"|" \
        "$repo/deploy/forgehand.example.toml" >"$config"
    # Environments' setup reaches only the registries this host's own
    # package managers use (review them in the file): no list is built in.
    { echo; "$bin" env hosts; } >>"$config"
  )
  cat >&2 <<MSG
==> wrote $config (mode 600) with fresh secrets:
    webhook secret (GitHub and Gitea): $secret
    operator API token:                $token
    data:                              $data (server.data_dir)
    environment.allow_hosts:           the registries this host's pip, npm and apt use
                                       (forgehand env hosts; review them there)
    Then set server.public_url there (the address your forge reaches) and run
      $bin setup github            (creates a GitHub App; or --repo OWNER/NAME with a token)
      $bin setup gitea --repo OWNER/NAME
    or point a webhook at http://<this host>:8080/webhooks/github (or /webhooks/gitea)
    with content type application/json and that secret.
MSG
}
