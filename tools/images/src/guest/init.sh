#!/bin/sh
# /init of local/demo-linux (PID 1 from the initramfs). Sets up the system, finds the cloud-init NoCloud seed,
# prints the boot marker, then hands PID 1 to busybox init (/etc/inittab: user data, shell on ttyS0, Ctrl-Alt-Del).
export PATH=/sbin:/bin:/usr/sbin:/usr/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null || mdev -s
mkdir -p /dev/pts /dev/shm /run/cidata /run/kvt /tmp /var/log
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
exec 0</dev/console 1>/dev/console 2>&1
# Kernel messages stay in dmesg, not on the console (every serial byte is slow under emulation).
dmesg -n 1 2>/dev/null

# Modules from the same kernel package, in dependency order (generated at build time).
while read -r mod; do
  [ -n "$mod" ] && insmod "/lib/modules/$(uname -r)/$mod" 2>/dev/null
done </etc/kvt/modules

# The NoCloud seed: a block device labelled cidata (iso9660 or vfat; virtio, SATA or SCSI, disk or CD-ROM). Devices
# may take a moment to appear. A seed appended to the initramfs as /run/cidata/{meta-data,user-data} (a second cpio
# segment, as the nested lane's direct VMM checks give it) is already there, and no device is waited for.
seed=""
[ -f /run/cidata/meta-data ] && seed="initramfs"
tries=0
seen=0
while [ -z "$seed" ] && [ "$tries" -lt 20 ]; do
  seed=$(findfs LABEL=cidata 2>/dev/null || findfs LABEL=CIDATA 2>/dev/null)
  [ -n "$seed" ] && break
  # Give disks a second to appear; once some have, a few more tries for the seed among them, then go on without.
  if ls /dev/vd* /dev/sd* /dev/sr* >/dev/null 2>&1; then seen=$((seen + 1)); [ "$seen" -gt 3 ] && break
  elif [ "$tries" -ge 10 ]; then break; fi
  usleep 100000
  tries=$((tries + 1))
done
if [ -n "$seed" ] && [ "$seed" != "initramfs" ]; then
  mount -o ro -t iso9660 "$seed" /run/cidata 2>/dev/null || mount -o ro -t vfat "$seed" /run/cidata 2>/dev/null ||
    echo "kvt-init: cannot mount the cidata seed $seed"
fi

# Hostname: NoCloud meta-data local-hostname (YAML or JSON), else the image name.
host=demo-linux
if [ -f /run/cidata/meta-data ]; then
  # JSON (KubeVirt writes one line: {"instance-id":"...","local-hostname":"..."}) or YAML (local-hostname: x).
  h=$(sed -n -e 's/.*"local-hostname"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' \
    -e 's/^[[:space:]]*local-hostname[[:space:]]*:[[:space:]]*\([^[:space:]]*\).*/\1/p' /run/cidata/meta-data | head -n 1)
  [ -n "$h" ] && host="$h"
fi
hostname "$host"
echo "$host" >/etc/hostname

echo "@@BOOT_MARKER@@ (kernel $(uname -r), seed ${seed:-none}, uptime $(cut -d' ' -f1 /proc/uptime)s)"
exec /sbin/init
