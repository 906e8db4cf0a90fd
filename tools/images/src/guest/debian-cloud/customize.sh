#!/bin/sh
# mmdebstrap's customize hook for local/debian-cloud: $1 is the root filesystem being built, the other files of this
# directory are copied in. Runs after every package is installed, with /proc, /sys and /dev mounted in $1.
set -eu
root=$1
here=$(dirname "$0")
marker=$2
install -m 0644 "$here/cloud.cfg" "$root/etc/cloud/cloud.cfg.d/90_kvt.cfg"
install -m 0644 "$here/fstab" "$root/etc/fstab"
install -m 0644 "$here/initramfs-modules" "$root/etc/initramfs-tools/modules"
install -m 0644 "$here/initramfs.conf" "$root/etc/initramfs-tools/conf.d/kvt.conf"
install -m 0644 "$here/boot-marker.service" "$root/etc/systemd/system/kvt-boot-marker.service"
sed "s/@@BOOT_MARKER@@/$marker/" "$here/boot-marker.sh" >"$root/usr/local/sbin/kvt-boot-marker"
chmod 0755 "$root/usr/local/sbin/kvt-boot-marker"
chroot "$root" systemctl enable kvt-boot-marker.service
# e2scrub_reap looks for stale LVM snapshots of ext4 scrubs; a VM's one disk has none, and its 16 s of CPU at boot
# (one vCPU under TCG in the nested lane) delayed everything else.
chroot "$root" systemctl disable e2scrub_reap.service
echo debian >"$root/etc/hostname"
echo LANG=C.UTF-8 >"$root/etc/default/locale"
printf 'auto lo\niface lo inet loopback\n\nsource /etc/network/interfaces.d/*\n' >"$root/etc/network/interfaces"
# Every VM gets its own identity: systemd makes a machine-id on first boot, cloud-init's ssh module new host keys.
: >"$root/etc/machine-id"
rm -f "$root/var/lib/dbus/machine-id" "$root"/etc/ssh/ssh_host_*
# The initramfs again, now with the modules above (the kernel's postinst made one before they were listed).
chroot "$root" update-initramfs -u -k all
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/log/*.log
