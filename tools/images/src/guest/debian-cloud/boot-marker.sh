#!/bin/sh
# Run by kvt-boot-marker.service after cloud-final: one line on the console saying the guest is up. cloud-init's
# outcome is read from its result file, not `cloud-init status` (a Python start: 20 s under TCG in the nested lane):
# no result file = not run, an empty error list = done, else error.
result=/run/cloud-init/result.json
if [ ! -e "$result" ]; then
  status=not-run
elif grep -Eq '"errors": *\[ *\]' "$result"; then
  status=done
else
  status=error
fi
uptime=$(cut -d' ' -f1 /proc/uptime)
printf '\n@@BOOT_MARKER@@ (kernel %s, cloud-init %s, uptime %s s)\n' "$(uname -r)" "$status" "$uptime" >/dev/console
