#!/bin/sh
# Run by kvt-boot-marker.service after cloud-final: one line on the console saying the guest is up.
status=$(cloud-init status 2>/dev/null | sed -n 's/^status: //p')
uptime=$(cut -d' ' -f1 /proc/uptime)
printf '\n@@BOOT_MARKER@@ (kernel %s, cloud-init %s, uptime %s s)\n' "$(uname -r)" "${status:-unknown}" "$uptime" >/dev/console
