/**
 * virt-api's Prometheus metrics: `kubevirt_virt_api_ready_status`, `kubevirt_console_active_connections{namespace}`
 * and `kubevirt_portforward_active_tunnels{namespace}` (KubeVirt's names; per-namespace here, since per-VMI series
 * come only from virt-handler), and
 * `kubevirt_virt_api_requests_total{handler,code}` (ours: webhook and subresource requests by handler and status).
 * The API client's `kubevirt_rest_client_*` series are registered by @kvt/kube's RestClient on the same registry.
 */
import { Counter, Gauge, type Registry } from "@kvt/observability";
import type { ConsoleSessionObserver, RequestObserver } from "./app.ts";

/** The metric hooks virt-api's app and composition root call. */
export interface VirtApiMetrics extends ConsoleSessionObserver, RequestObserver {
  setReady(ready: boolean): void;
  /** Open port-forward tunnels. */
  readonly portForwardTunnels: ConsoleSessionObserver;
}

/** Registers virt-api's metrics on `registry`; returns the observers to pass to the app. */
export function virtApiMetrics(registry: Registry): VirtApiMetrics {
  const ready = new Gauge({
    name: "kubevirt_virt_api_ready_status",
    help: "Indication for a virt-api that is ready to serve: 1 when ready, 0 otherwise.",
    registers: [registry],
  });
  const active = new Gauge({
    name: "kubevirt_console_active_connections",
    help: "Amount of active serial console connections, broken down by namespace.",
    labelNames: ["namespace"],
    registers: [registry],
  });
  const tunnels = new Gauge({
    name: "kubevirt_portforward_active_tunnels",
    help: "Amount of active portforward tunnels, broken down by namespace.",
    labelNames: ["namespace"],
    registers: [registry],
  });
  const requests = new Counter({
    name: "kubevirt_virt_api_requests_total",
    help: "Requests to virt-api's webhooks and subresources, by handler and HTTP status code.",
    labelNames: ["handler", "code"],
    registers: [registry],
  });
  return {
    setReady: (value) => ready.set(value ? 1 : 0),
    opened: (namespace) => active.inc({ namespace }),
    closed: (namespace) => active.dec({ namespace }),
    handled: (handler, code) => requests.inc({ handler, code: String(code) }),
    portForwardTunnels: {
      opened: (namespace) => tunnels.inc({ namespace }),
      closed: (namespace) => tunnels.dec({ namespace }),
    },
  };
}
