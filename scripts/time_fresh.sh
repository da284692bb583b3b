#!/usr/bin/env bash
# Times one of the README's commands as a new user meets it: on a bare Debian 12
# (debootstrap's minbase variant, plus git), in a fresh clone of this repository's HEAD,
# as root, with every package still to install. This machine's CUDA toolkit, when it has
# one, is mounted read-only at /usr/local/cuda, as on a machine that has one.
#   sudo bash scripts/time_fresh.sh demo|test|full [FOLDER]
# demo runs scripts/demo.sh, test scripts/test.sh, full scripts/test.sh --full. FOLDER
# (default /var/tmp/shardify-fresh) keeps the bare system between runs; each run works in
# a copy of it. Prints when each phase began, in seconds from the start, and the total;
# the whole output is in FOLDER/<command>.log. Needs root, debootstrap and Debian's mirror.
set -euo pipefail
what=${1:-}
case "$what" in
  demo) command="bash scripts/demo.sh" ;;
  test) command="bash scripts/test.sh" ;;
  full) command="bash scripts/test.sh --full" ;;
  *)
    echo "usage: sudo bash scripts/time_fresh.sh demo|test|full [FOLDER]" >&2
    exit 2
    ;;
esac
folder=$(realpath -m "${2:-/var/tmp/shardify-fresh}")
[ "$(id -u)" -eq 0 ] || { echo "time_fresh: needs root (chroot, mount)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "time_fresh: needs debootstrap (apt-get install debootstrap)" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$folder"

base=$folder/base
if [ ! -f "$base/.complete" ]; then
  echo "time_fresh: making a bare Debian 12 in $base"
  rm -rf "$base"
  debootstrap --variant=minbase bookworm "$base" http://deb.debian.org/debian >"$folder/debootstrap.log" 2>&1
  cp /etc/resolv.conf "$base/etc/resolv.conf"
  chroot "$base" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin bash -c \
    'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends git ca-certificates && apt-get clean' \
    >>"$folder/debootstrap.log" 2>&1
  touch "$base/.complete"
fi

run=$folder/run-$what
mounted() { grep -qF " $run/" /proc/mounts; }
unmount() {
  for m in usr/local/cuda dev sys proc; do
    if grep -qF " $run/$m " /proc/mounts; then umount -R -l "$run/$m"; fi
  done
}
unmount
if mounted; then
  echo "time_fresh: $run still has mounts; not removing it" >&2
  exit 1
fi
rm -rf "$run"
cp -a "$base" "$run"
trap unmount EXIT
git clone -q "$repo" "$run/root/shardify"
if [ -d "$repo/../shared" ]; then cp -r "$repo/../shared" "$run/root/shared"; fi
mount -t proc proc "$run/proc"
mount --rbind /sys "$run/sys"
mount --rbind /dev "$run/dev"
if [ -d /usr/local/cuda ]; then
  mkdir -p "$run/usr/local/cuda"
  mount --bind "$(readlink -f /usr/local/cuda)" "$run/usr/local/cuda"
  mount -o remount,bind,ro "$run/usr/local/cuda"
fi
cp /etc/resolv.conf "$run/etc/resolv.conf"

log=$folder/$what.log
echo "time_fresh: $command in a fresh clone of $(git -C "$repo" rev-parse --short HEAD) on a bare Debian 12 ($run)"
start=$(date +%s)
set +e
chroot "$run" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 CI="${CI:-}" \
  bash -c "cd /root/shardify && $command" </dev/null 2>&1 |
  while IFS= read -r line; do printf '%5d %s\n' $(($(date +%s) - start)) "$line"; done >"$log"
rc=${PIPESTATUS[0]}
set -e
grep -E '^ *[0-9]+ (== |install-deps: (installing|done|all))' "$log" | cut -c1-160
echo "time_fresh: $what exited $rc after $(($(date +%s) - start)) s (log: $log)"
exit "$rc"
