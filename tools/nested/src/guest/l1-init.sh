#!/bin/sh
# /init of the nested lane's L1 host (runs under QEMU TCG with an emulated SVM CPU). It mounts the build host's
# filesystem read-only over 9p, loads KVM (nested SVM, nested paging) and runs one job of the project inside it:
#   kvt.job=<path relative to the project>  kvt.project=<project dir on the host>  kvt.args=<comma-separated args>
# then powers the L1 host off. Everything the job prints goes to the L1 console (the lane reads it on stdout).
export PATH=/bin:/sbin
/bin/busybox --install -s /bin
mkdir -p /proc /sys /dev /host /tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec 0</dev/console 1>/dev/console 2>&1
# Errors and worse reach the console (OOM kills, hung tasks, RCU stalls, lockups): the lane prints them when a job
# does not finish.
dmesg -n 4
arg() { tr ' ' '\n' </proc/cmdline | sed -n "s/^$1=//p" | tail -n 1; }
job=$(arg kvt.job)
project=$(arg kvt.project)
args=$(arg kvt.args | tr ',' ' ')

fail() { echo "KVT_L1_FAIL $*"; poweroff -f; }
while read -r mod opts; do
  [ -n "$mod" ] && { insmod "/mods/$mod" $opts || fail "insmod $mod"; }
done </mods/order
# Loopback: the live-migration check moves a guest between two VMM processes over 127.0.0.1.
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up || fail "loopback"
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /host || fail "mount 9p"
for d in proc sys dev; do mount --bind /$d /host/$d || fail "bind /$d"; done
# A writable /tmp for the job. A checkout that lives under the host's /tmp (or /run) would vanish beneath the tmpfs,
# so it is bind-mounted back at the same path first.
[ -d "/host$project" ] || fail "the project $project is not visible through 9p"
mkdir -p /project && mount --bind "/host$project" /project || fail "bind the project"
mount -t tmpfs -o mode=1777 tmpfs /host/tmp || fail "tmpfs /tmp"
mount -t tmpfs tmpfs /host/run 2>/dev/null
if [ ! -f "/host$project/package.json" ]; then
  mkdir -p "/host$project" && mount --bind /project "/host$project" || fail "re-mount the project at $project"
fi
[ -f "/host$project/package.json" ] || fail "the project $project has no package.json inside L1"
[ -c /dev/kvm ] || fail "no /dev/kvm after loading kvm-amd"
# Every 30 s: load, free memory and the busiest processes, so a job that stops answering leaves a trace of L1's
# state (the lane prints the last console lines when it stops L1).
(
  while sleep 30; do
    echo "l1-monitor: up $(cut -d' ' -f1 /proc/uptime)s load $(cut -d' ' -f1-3 /proc/loadavg)" \
      "$(grep -e MemAvailable -e Shmem: /proc/meminfo | tr -s ' ' | tr '\n' ' ')"
    top -b -n 1 | sed -n '5,9p' | sed 's/^/l1-monitor: /'
  done
) &
echo "KVT_L1_READY uptime $(cut -d' ' -f1 /proc/uptime)s npt=$(cat /sys/module/kvm_amd/parameters/npt 2>/dev/null)"
chroot /host /usr/bin/env -i HOME=/tmp PATH="$project/node_modules/.bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  KVT_NESTED_L1=1 TMPDIR=/tmp /bin/sh -c "cd '$project' && exec node '$job' $args"
code=$?
[ "$code" = 0 ] || echo "KVT_L1_FAIL the job '$job' exited with code $code"
echo "KVT_L1_JOB_EXIT $code"
# poweroff -f does not wait for the UART: let its transmit buffer drain (the count stops moving) so the last lines
# (the job's exit above) reach the lane.
prev=""
while :; do cur=$(grep '^0:' /proc/tty/driver/serial); [ "$cur" = "$prev" ] && break; prev=$cur; sleep 0.2; done
poweroff -f
