#!/bin/sh
# Run by busybox acpid on the ACPI power button (QMP system_powerdown, KubeVirt's graceful shutdown): power off.
/sbin/poweroff
