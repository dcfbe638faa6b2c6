#!/usr/bin/env bash
# Forgehand's container image (deploy/Containerfile).
#
#   image.sh build [--offline] [--binary PATH] [--features LIST] [--tag TAG]
#       builds localhost/forgehand:dev. Without --offline: the whole
#       multi-stage build from source (needs a container registry for the
#       Rust and Debian images). With --offline: only the runtime stage,
#       from the base `image.sh base` imported and a binary built on this
#       host (default: target/release/forgehand; --binary to choose).
#   image.sh base [--force]
#       debootstraps deploy/container/runtime.packages into a tarball
#       (cached under /var/cache/forgehand/container-base, by a hash of the
#       list) and imports it as localhost/forgehand-base:bookworm: the
#       offline build's base, made without any registry.
#   image.sh flags [--backend namespace|microvm|intake]
#       prints, one per line, the `podman run` / `docker run` flags the
#       sandbox backend needs inside the container (default: namespace).
#
# Environment: FORGEHAND_CONTAINER_ENGINE (podman, else docker: whichever
# is installed), FORGEHAND_OCI_RUNTIME (podman's --runtime; default runc
# when installed: crun cannot run the sandbox's nested namespaces on some
# hosts), FORGEHAND_IMAGE_CACHE, DEBOOTSTRAP_MIRROR.
set -Eeuo pipefail

prog=image.sh
die() { echo "$prog: error: $*" >&2; exit 1; }
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
here="$repo/deploy"
tag_default=localhost/forgehand:dev
base_image=localhost/forgehand-base:bookworm
cache="${FORGEHAND_IMAGE_CACHE:-/var/cache/forgehand/container-base}"

usage() { sed -n '2,/^set -E/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }

engine() {
  if [ -n "${FORGEHAND_CONTAINER_ENGINE:-}" ]; then
    echo "$FORGEHAND_CONTAINER_ENGINE"
  elif command -v podman >/dev/null 2>&1; then
    echo podman
  elif command -v docker >/dev/null 2>&1; then
    echo docker
  else
    die "neither podman nor docker is installed (Debian: apt-get install podman runc)"
  fi
}

# image_exists ENGINE IMAGE: whether ENGINE has IMAGE. `image inspect`
# answers on docker and podman alike (`image exists` is podman's alone:
# with docker it always said no).
image_exists() {
  "$1" image inspect "$2" >/dev/null 2>&1
}

# podman's --runtime, when one is to be chosen.
runtime_args() {
  [ "$(basename "$1")" = podman ] || return 0
  local runtime="${FORGEHAND_OCI_RUNTIME:-}"
  if [ -z "$runtime" ] && command -v runc >/dev/null 2>&1; then runtime=runc; fi
  [ -z "$runtime" ] || echo "--runtime=$runtime"
}

# The packages and suite of runtime.packages, as "suite pkg pkg ...".
read_packages() {
  local file="$here/container/runtime.packages" line words suite="" packages=()
  while IFS= read -r line || [ -n "$line" ]; do
    line="${line%%#*}"
    read -r -a words <<<"$line" || true
    [ ${#words[@]} -gt 0 ] || continue
    if [ "${words[0]}" = "suite:" ]; then suite="${words[1]}"; else packages+=("${words[0]}"); fi
  done <"$file"
  [ -n "$suite" ] && [ ${#packages[@]} -gt 0 ] || die "$file: needs a suite line and packages"
  echo "$suite ${packages[*]}"
}

cmd_flags() {
  local backend=namespace
  while [ $# -gt 0 ]; do
    case "$1" in
      --backend) backend="${2:-}"; shift ;;
      --backend=*) backend="${1#--backend=}" ;;
      *) die "flags: unknown argument $1" ;;
    esac
    shift
  done
  case "$backend" in
    namespace)
      # bubblewrap makes user, mount, PID and network namespaces and
      # mounts a fresh /proc: the runtime's seccomp and AppArmor profiles
      # forbid those calls, and the kernel refuses a new /proc while the
      # runtime's masks cover parts of the container's. The sandboxes'
      # limits are cgroups the container must be able to write, and each
      # working copy is an ext4 image on a loop device. --privileged gives
      # all of that at once (it is what podman and docker offer for a
      # writable cgroup tree and loop devices); the agent still runs as
      # the unprivileged forgehand-sandbox user inside bubblewrap, never
      # as the container's root. A cgroup namespace of its own keeps the
      # host's cgroup tree out of sight (the default on cgroup v2 hosts).
      echo "--privileged"
      echo "--cgroupns=private"
      echo "--env=FORGEHAND_SANDBOX__BACKEND=namespace"
      ;;
    microvm)
      # libkrun boots each sandbox under KVM: the device is all it needs.
      echo "--device=/dev/kvm"
      echo "--env=FORGEHAND_SANDBOX__BACKEND=microvm"
      ;;
    intake)
      # Runs no jobs, so no sandbox: no extra rights at all.
      echo "--env=FORGEHAND_QUEUE__WORKERS=0"
      ;;
    *) die "flags: unknown backend '$backend' (namespace, microvm or intake)" ;;
  esac
}

cmd_base() {
  local force=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --force) force=1 ;;
      *) die "base: unknown argument $1" ;;
    esac
    shift
  done
  local eng; eng="$(engine)"
  local spec suite packages arch hash tarball
  spec="$(read_packages)"
  suite="${spec%% *}"
  packages="${spec#* }"
  arch="$(dpkg --print-architecture)"
  # The list and this script decide the tarball's content.
  hash="$({ printf 'suite=%s\narch=%s\n' "$suite" "$arch"; cat "$here/container/runtime.packages" "${BASH_SOURCE[0]}"; } | sha256sum | cut -c1-16)"
  tarball="$cache/base-$suite-$arch-$hash.tar"
  if [ "$force" = 0 ] && image_exists "$eng" "$base_image-$hash"; then
    "$eng" tag "$base_image-$hash" "$base_image"
    echo "base image up to date: $base_image ($hash)"
    return 0
  fi
  if [ "$force" = 1 ] || [ ! -s "$tarball" ]; then
    [ "$(id -u)" = 0 ] || die "building the base needs root (debootstrap)"
    command -v debootstrap >/dev/null 2>&1 || die "debootstrap is not installed (apt-get install debootstrap)"
    mkdir -p "$cache"
    local tmp; tmp="$(mktemp -d "$cache/.build.XXXXXX")"
    # shellcheck disable=SC2064
    trap "rm -rf --one-file-system '$tmp'" EXIT
    local mirror; mirror="$("$repo/images/debian-mirror" "$suite")"
    echo "==> debootstrap $suite ($arch, minbase) with: $packages"
    debootstrap --variant=minbase --arch="$arch" --include="${packages// /,}" \
      "$suite" "$tmp/root" ${mirror:+"$mirror"} >"$tmp/debootstrap.out" 2>&1 ||
      { tail -n 30 "$tmp/debootstrap.out" >&2; die "debootstrap failed"; }
    rm -rf "$tmp/root"/var/lib/apt/lists/* "$tmp/root"/var/cache/apt/archives/*.deb "$tmp/root"/var/cache/apt/*.bin
    # As Debian's slim images: no manuals, translations or documentation
    # but the copyright files (half the size of the packages above), now
    # and for what apt installs later.
    cat >"$tmp/root/etc/dpkg/dpkg.cfg.d/forgehand-slim" <<'SLIM'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
SLIM
    find "$tmp/root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    find "$tmp/root/usr/share/doc" -mindepth 1 -type d -empty -delete
    rm -rf "$tmp/root"/usr/share/man/* "$tmp/root"/usr/share/info/*
    find "$tmp/root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
    # The container runtime provides these; the host's must not leak in.
    : >"$tmp/root/etc/resolv.conf"
    rm -f "$tmp/root/etc/hostname"
    tar -C "$tmp/root" --numeric-owner -cf "$tmp/base.tar" .
    mv "$tmp/base.tar" "$tarball"
    rm -rf --one-file-system "$tmp"
    trap - EXIT
    # Tarballs of other lists or scripts are stale.
    find "$cache" -maxdepth 1 -name 'base-*.tar' -not -name "$(basename "$tarball")" -delete
  fi
  echo "==> importing $tarball as $base_image"
  "$eng" import --change 'CMD ["/bin/bash"]' "$tarball" "$base_image-$hash" >/dev/null
  "$eng" tag "$base_image-$hash" "$base_image"
  # Bases of other hashes are stale (removed unless something uses them).
  local old
  for old in $("$eng" images --format '{{.Repository}}:{{.Tag}}' | grep "^${base_image}-" | grep -v -- "-$hash\$"); do
    "$eng" rmi "$old" >/dev/null 2>&1 || true
  done
  echo "base image: $base_image ($hash)"
}

cmd_build() {
  local offline=0 binary="" features="" tag="$tag_default" previous
  while [ $# -gt 0 ]; do
    case "$1" in
      --offline) offline=1 ;;
      --binary) binary="${2:-}"; shift ;;
      --features) features="${2:-}"; shift ;;
      --tag) tag="${2:-}"; shift ;;
      *) die "build: unknown argument $1" ;;
    esac
    shift
  done
  local eng; eng="$(engine)"
  local args=(build -f "$here/Containerfile" -t "$tag")
  # HEALTHCHECK is part of the docker image format only.
  [ "$(basename "$eng")" != podman ] || args+=(--format docker)
  local rt; rt="$(runtime_args "$eng")"
  [ -z "$rt" ] || args+=("$rt")
  if [ "$offline" = 1 ]; then
    [ -z "$features" ] || die "build: --features needs the build from source (without --offline); build the binary with them and pass --binary"
    image_exists "$eng" "$base_image" ||
      die "no base image $base_image: run 'bash deploy/image.sh base' first (it needs root and the Debian archive, no container registry)"
    binary="${binary:-${CARGO_TARGET_DIR:-$repo/target}/release/forgehand}"
    [ -x "$binary" ] || die "no forgehand binary at $binary: cargo build --release --bin forgehand, or pass --binary"
    local context; context="$(mktemp -d)"
    # shellcheck disable=SC2064
    trap "rm -rf '$context'" EXIT
    mkdir -p "$context/deploy/container" "$context/images" "$context/dist"
    cp "$here/container/"* "$context/deploy/container/"
    cp "$repo/images/build-rootfs" "$repo/images/debian-mirror" "$repo/images/guest.packages" "$context/images/"
    # Debug symbols are most of a binary's size and nothing in the image reads them.
    strip -o "$context/dist/forgehand" "$binary" 2>/dev/null || cp "$binary" "$context/dist/forgehand"
    args+=(--target runtime-offline --build-arg "BASE=$base_image")
    [ "$(basename "$eng")" != podman ] || args+=(--pull=never)
    echo "==> $eng ${args[*]} (offline, binary $binary)"
    previous="$("$eng" image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)"
    "$eng" "${args[@]}" "$context"
    rm -rf "$context"
    trap - EXIT
  else
    args+=(--target runtime)
    [ -z "$features" ] || args+=(--build-arg "FEATURES=$features")
    echo "==> $eng ${args[*]} $repo"
    previous="$("$eng" image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)"
    "$eng" "${args[@]}" "$repo"
  fi
  # The image this tag named before, when nothing else names or runs it.
  if [ -n "$previous" ] && [ "$previous" != "$("$eng" image inspect --format '{{.Id}}' "$tag")" ]; then
    "$eng" rmi "$previous" >/dev/null 2>&1 || true
  fi
  echo "built $tag ($("$eng" image inspect --format '{{.Size}}' "$tag") bytes)"
}

[ $# -gt 0 ] || { usage >&2; exit 2; }
command="$1"
shift
case "$command" in
  build) cmd_build "$@" ;;
  base) cmd_base "$@" ;;
  flags) cmd_flags "$@" ;;
  -h | --help | help) usage ;;
  *) usage >&2; die "unknown command $command" ;;
esac
