#!/bin/sh
# Runs a command as on a host without /dev/kvm: in a private mount namespace whose /dev is a copy of the host's
# (every entry bind-mounted back) minus the kvm node. Where the host has no /dev/kvm it just runs the command.
set -eu
[ -e /dev/kvm ] || exec "$@"
if [ "${KVT_WITHOUT_KVM_NS:-}" != "$$" ]; then
  # Re-exec in a new mount namespace; the marker (our future pid: exec keeps it) stops a second round.
  if [ "$(id -u)" = 0 ]; then
    exec env KVT_WITHOUT_KVM_NS=$$ unshare --mount --propagation private "$0" "$@"
  fi
  exec env KVT_WITHOUT_KVM_NS=$$ unshare --map-root-user --mount --propagation private "$0" "$@"
fi
unset KVT_WITHOUT_KVM_NS
dev=$(mktemp -d "${TMPDIR:-/tmp}/kvt-nokvm-dev.XXXXXX")
mount -t tmpfs -o mode=755,size=64k kvt-nokvm-dev "$dev"
for e in /dev/* /dev/.[!.]*; do
  [ -e "$e" ] || [ -L "$e" ] || continue
  n=${e#/dev/}
  [ "$n" = kvm ] && continue
  if [ -L "$e" ]; then cp -P "$e" "$dev/$n"
  elif [ -d "$e" ]; then mkdir "$dev/$n" && mount --rbind "$e" "$dev/$n"
  else : >"$dev/$n" && mount --bind "$e" "$dev/$n"
  fi
done
mount --move "$dev" /dev
rmdir "$dev" 2>/dev/null || true
exec "$@"
