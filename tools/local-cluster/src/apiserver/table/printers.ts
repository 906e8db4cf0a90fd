/**
 * Server-side columns of the built-in kinds (k8s.io/kubernetes pkg/printers/internalversion/printers.go), so
 * `kubectl get` shows what a real cluster shows. Every column list starts after Name.
 */
import type { PrinterColumn } from "../resources/types.ts";
import { isObject, type Json, type KubeObject } from "../types.ts";
import { ageOf } from "./duration.ts";
import { STORAGE_COLUMNS } from "./storage-printers.ts";

type O = Record<string, unknown>;
const obj = (v: unknown): O => (isObject(v) ? v : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

function col(
  name: string,
  render: (o: KubeObject, now: number) => Json,
  priority = 0,
  type: PrinterColumn["type"] = "string",
): PrinterColumn {
  return { name, type, description: name, priority, render };
}

/** The Age column every kind has. */
export const AGE: PrinterColumn = {
  name: "Age",
  type: "string",
  description: "CreationTimestamp is a timestamp representing the server time when this object was created.",
  priority: 0,
  render: (o, now) => ageOf(o.metadata.creationTimestamp, now),
};

function podStatus(o: KubeObject): string {
  const status = obj(o.status);
  let reason = str(status.reason) ?? str(status.phase) ?? "Pending";
  for (const cs of arr(status.containerStatuses)) {
    const st = obj(obj(cs).state);
    const waiting = str(obj(st.waiting).reason);
    const terminated = obj(st.terminated);
    if (waiting) reason = waiting;
    else if (str(terminated.reason)) reason = terminated.reason as string;
  }
  if (o.metadata.deletionTimestamp && status.reason !== "NodeLost") reason = "Terminating";
  return reason;
}

const POD: PrinterColumn[] = [
  col("Ready", (o) => {
    const total = arr(obj(o.spec).containers).length;
    const ready = arr(obj(o.status).containerStatuses).filter((c) => obj(c).ready === true).length;
    return `${ready}/${total}`;
  }),
  col("Status", podStatus),
  col(
    "Restarts",
    (o) =>
      String(arr(obj(o.status).containerStatuses).reduce<number>((n, c) => n + (Number(obj(c).restartCount) || 0), 0)),
    0,
    "string",
  ),
  AGE,
  col("IP", (o) => str(obj(o.status).podIP) ?? "<none>", 1),
  col("Node", (o) => str(obj(o.spec).nodeName) ?? "<none>", 1),
  col("Nominated Node", (o) => str(obj(o.status).nominatedNodeName) ?? "<none>", 1),
  col(
    "Readiness Gates",
    (o) => {
      const gates = arr(obj(o.spec).readinessGates);
      return gates.length ? `0/${gates.length}` : "<none>";
    },
    1,
  ),
];

function nodeStatus(o: KubeObject): string {
  const ready = arr(obj(o.status).conditions)
    .map(obj)
    .find((c) => c.type === "Ready");
  let s = ready ? (ready.status === "True" ? "Ready" : ready.status === "False" ? "NotReady" : "Unknown") : "Unknown";
  if (obj(o.spec).unschedulable === true) s += ",SchedulingDisabled";
  return s;
}

function nodeAddress(o: KubeObject, type: string): string {
  const a = arr(obj(o.status).addresses)
    .map(obj)
    .find((x) => x.type === type);
  return str(a?.address) ?? "<none>";
}

const NODE: PrinterColumn[] = [
  col("Status", nodeStatus),
  col("Roles", (o) => {
    const roles = Object.keys(o.metadata.labels ?? {})
      .filter((k) => k.startsWith("node-role.kubernetes.io/"))
      .map((k) => k.slice("node-role.kubernetes.io/".length));
    return roles.length ? roles.sort().join(",") : "<none>";
  }),
  AGE,
  col("Version", (o) => str(obj(obj(o.status).nodeInfo).kubeletVersion) ?? ""),
  col("Internal-IP", (o) => nodeAddress(o, "InternalIP"), 1),
  col("External-IP", (o) => nodeAddress(o, "ExternalIP"), 1),
  col("OS-Image", (o) => str(obj(obj(o.status).nodeInfo).osImage) ?? "<unknown>", 1),
  col("Kernel-Version", (o) => str(obj(obj(o.status).nodeInfo).kernelVersion) ?? "<unknown>", 1),
  col("Container-Runtime", (o) => str(obj(obj(o.status).nodeInfo).containerRuntimeVersion) ?? "<unknown>", 1),
];

const SERVICE: PrinterColumn[] = [
  col("Type", (o) => str(obj(o.spec).type) ?? "ClusterIP"),
  col("Cluster-IP", (o) => str(obj(o.spec).clusterIP) ?? "<none>"),
  col("External-IP", (o) => {
    const ips = arr(obj(o.spec).externalIPs).filter((x): x is string => typeof x === "string");
    return ips.length ? ips.join(",") : "<none>";
  }),
  col("Port(s)", (o) => {
    const ports = arr(obj(o.spec).ports).map((p) => {
      const q = obj(p);
      const node = q.nodePort ? `:${JSON.stringify(q.nodePort)}` : "";
      return `${String(q.port)}${node}/${str(q.protocol) ?? "TCP"}`;
    });
    return ports.length ? ports.join(",") : "<none>";
  }),
  AGE,
  col(
    "Selector",
    (o) => {
      const sel = Object.entries(obj(obj(o.spec).selector)).map(([k, v]) => `${k}=${String(v)}`);
      return sel.length ? sel.sort().join(",") : "<none>";
    },
    1,
  ),
];

const dataCount = (o: KubeObject): number => Object.keys(obj(o.data)).length + Object.keys(obj(o.binaryData)).length;

const DEPLOYMENT: PrinterColumn[] = [
  col("Ready", (o) => `${Number(obj(o.status).readyReplicas) || 0}/${Number(obj(o.spec).replicas ?? 1)}`),
  col("Up-to-date", (o) => Number(obj(o.status).updatedReplicas) || 0, 0, "integer"),
  col("Available", (o) => Number(obj(o.status).availableReplicas) || 0, 0, "integer"),
  AGE,
];

const DAEMONSET: PrinterColumn[] = [
  col("Desired", (o) => Number(obj(o.status).desiredNumberScheduled) || 0, 0, "integer"),
  col("Current", (o) => Number(obj(o.status).currentNumberScheduled) || 0, 0, "integer"),
  col("Ready", (o) => Number(obj(o.status).numberReady) || 0, 0, "integer"),
  col("Up-to-date", (o) => Number(obj(o.status).updatedNumberScheduled) || 0, 0, "integer"),
  col("Available", (o) => Number(obj(o.status).numberAvailable) || 0, 0, "integer"),
  col("Node Selector", (o) => {
    const sel = Object.entries(obj(obj(obj(obj(o.spec).template).spec).nodeSelector)).map(
      ([k, v]) => `${k}=${String(v)}`,
    );
    return sel.length ? sel.join(",") : "<none>";
  }),
  AGE,
];

const intOrPercent = (v: unknown): string =>
  typeof v === "number" ? String(v) : typeof v === "string" && v !== "" ? v : "N/A";

const PDB: PrinterColumn[] = [
  col("Min Available", (o) => intOrPercent(obj(o.spec).minAvailable)),
  col("Max Unavailable", (o) => intOrPercent(obj(o.spec).maxUnavailable)),
  col("Allowed Disruptions", (o) => Number(obj(o.status).disruptionsAllowed ?? 0), 0, "integer"),
  AGE,
];

const EVENT: PrinterColumn[] = [
  col("Last Seen", (o, now) =>
    ageOf(o.lastTimestamp ?? o.eventTime ?? o.firstTimestamp ?? o.metadata.creationTimestamp, now),
  ),
  col("Type", (o) => str(o.type) ?? ""),
  col("Reason", (o) => str(o.reason) ?? ""),
  col("Object", (o) => {
    const io = obj(o.involvedObject);
    return `${(str(io.kind) ?? "").toLowerCase()}/${str(io.name) ?? ""}`;
  }),
  col("Message", (o) => str(o.message) ?? ""),
  col("Source", (o) => str(obj(o.source).component) ?? str(o.reportingComponent) ?? "", 1),
  col("First Seen", (o, now) => ageOf(o.firstTimestamp ?? o.eventTime, now), 1),
  col("Count", (o) => Number(o.count ?? 1), 1, "integer"),
  col("Name", (o) => o.metadata.name ?? "", 1),
];

/** The first three items joined, and how many more there are (printers.go listWithMoreString). */
function firstThree(items: readonly string[], empty: string): string {
  if (items.length === 0) return empty;
  const shown = items.slice(0, 3).join(",");
  return items.length > 3 ? `${shown} + ${items.length - 3} more...` : shown;
}

const ENDPOINT_SLICE: PrinterColumn[] = [
  col("AddressType", (o) => str(o.addressType) ?? ""),
  col("Ports", (o) =>
    firstThree(
      arr(o.ports).map((p) => {
        const q = obj(p);
        return typeof q.port === "number" ? String(q.port) : (str(q.name) ?? "*");
      }),
      "<unset>",
    ),
  ),
  col("Endpoints", (o) =>
    firstThree(
      arr(o.endpoints).flatMap((e) => arr(obj(e).addresses).filter((a): a is string => typeof a === "string")),
      "<none>",
    ),
  ),
  AGE,
];

/** Built-in columns by `group/resource` (core group as `core`). */
export const BUILTIN_COLUMNS: ReadonlyMap<string, readonly PrinterColumn[]> = new Map<string, readonly PrinterColumn[]>(
  [
    ["core/pods", POD],
    ["core/nodes", NODE],
    ["core/namespaces", [col("Status", (o) => str(obj(o.status).phase) ?? "Active"), AGE]],
    ["core/services", SERVICE],
    ["discovery.k8s.io/endpointslices", ENDPOINT_SLICE],
    ["core/configmaps", [col("Data", dataCount, 0, "integer"), AGE]],
    ["core/secrets", [col("Type", (o) => str(o.type) ?? "Opaque"), col("Data", dataCount, 0, "integer"), AGE]],
    ["core/serviceaccounts", [col("Secrets", (o) => arr(o.secrets).length, 0, "integer"), AGE]],
    ["core/events", EVENT],
    ...STORAGE_COLUMNS,
    ["policy/poddisruptionbudgets", PDB],
    ["apps/deployments", DEPLOYMENT],
    ["apps/daemonsets", DAEMONSET],
    ["coordination.k8s.io/leases", [col("Holder", (o) => str(obj(o.spec).holderIdentity) ?? ""), AGE]],
    [
      "apiextensions.k8s.io/customresourcedefinitions",
      [col("Created At", (o) => o.metadata.creationTimestamp ?? null, 0, "date")],
    ],
    [
      "apiregistration.k8s.io/apiservices",
      [
        col("Service", (o) => {
          const s = obj(obj(o.spec).service);
          return s.name ? `${str(s.namespace) ?? ""}/${str(s.name) ?? ""}` : "Local";
        }),
        col("Available", (o) => {
          const c = arr(obj(o.status).conditions)
            .map(obj)
            .find((x) => x.type === "Available");
          return c ? (c.status === "True" ? "True" : `False (${String(c.reason)})`) : "Unknown";
        }),
        AGE,
      ],
    ],
  ],
);
