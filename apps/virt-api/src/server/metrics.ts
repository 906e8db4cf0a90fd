/**
 * virt-api's Prometheus metrics under KubeVirt's names: `kubevirt_virt_api_ready_status`,
 * `kubevirt_console_active_connections{namespace,name}` and
 * `kubevirt_vmi_last_api_connection_timestamp_seconds{namespace,name}`.
 */
import { Gauge, type Registry } from "@kvt/observability";
import type { ConsoleSessionObserver } from "./app.ts";

/** Registers virt-api's metrics on `registry`; returns the console observer to pass to the app. */
export function virtApiMetrics(registry: Registry): ConsoleSessionObserver & { setReady(ready: boolean): void } {
  const ready = new Gauge({
    name: "kubevirt_virt_api_ready_status",
    help: "Indication for a virt-api that is ready to take the lead.",
    registers: [registry],
  });
  const active = new Gauge({
    name: "kubevirt_console_active_connections",
    help: "Amount of active Console connections, broken down by namespace and vmi name.",
    labelNames: ["namespace", "name"],
    registers: [registry],
  });
  const last = new Gauge({
    name: "kubevirt_vmi_last_api_connection_timestamp_seconds",
    help: "Virtual Machine last API connection timestamp. Including VNC, console, portforward, SSH and usbredir connections.",
    labelNames: ["namespace", "name"],
    registers: [registry],
  });
  return {
    setReady: (value) => ready.set(value ? 1 : 0),
    opened: (namespace, name) => {
      active.inc({ namespace, name });
      last.set({ namespace, name }, Date.now() / 1000);
    },
    closed: (namespace, name) => {
      active.dec({ namespace, name });
      last.set({ namespace, name }, Date.now() / 1000);
    },
  };
}
