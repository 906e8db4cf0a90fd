/**
 * The slice of the kubevirt.io/v1 types virt-api reads. Written locally because @kvt/api had not landed its
 * types when this app was built; the field names are KubeVirt's, so swapping to @kvt/api's types is mechanical.
 */

/** ObjectMeta fields virt-api reads or writes. */
export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }>;
  deletionTimestamp?: string;
  creationTimestamp?: string;
}

/** A condition as KubeVirt writes them. */
export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}

/** VMI spec fields virt-api looks at (everything else passes through untouched). */
export interface VmiSpec {
  terminationGracePeriodSeconds?: number;
  livenessProbe?: { guestAgentPing?: Record<string, unknown> } & Record<string, unknown>;
  domain?: {
    devices?: {
      autoattachSerialConsole?: boolean;
      interfaces?: Array<
        { name: string; ports?: Array<{ name?: string; port: number; protocol?: string }> } & Record<string, unknown>
      >;
    } & Record<string, unknown>;
    features?: { acpi?: { enabled?: boolean } } & Record<string, unknown>;
  } & Record<string, unknown>;
  networks?: Array<{ name: string; pod?: Record<string, unknown> } & Record<string, unknown>>;
  [key: string]: unknown;
}

/** VirtualMachineInstance (kubevirt.io/v1). */
export interface VirtualMachineInstance {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec: VmiSpec;
  status?: {
    phase?: string;
    nodeName?: string;
    conditions?: Condition[];
    guestOSInfo?: Record<string, unknown>;
    [key: string]: unknown;
  };
}

/** One entry of `vm.status.stateChangeRequests`. */
export interface StateChangeRequest {
  action: "Start" | "Stop";
  data?: Record<string, string>;
  uid?: string;
}

/** VirtualMachine (kubevirt.io/v1). */
export interface VirtualMachine {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec: {
    running?: boolean;
    runStrategy?: string;
    template?: { metadata?: ObjectMeta; spec: VmiSpec };
    [key: string]: unknown;
  };
  status?: {
    created?: boolean;
    ready?: boolean;
    conditions?: Condition[];
    stateChangeRequests?: StateChangeRequest[];
    startFailure?: Record<string, unknown>;
    snapshotInProgress?: string;
    [key: string]: unknown;
  };
}

/** VirtualMachineInstanceMigration (kubevirt.io/v1). */
export interface VirtualMachineInstanceMigration {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec: { vmiName?: string; addedNodeSelector?: Record<string, string>; [key: string]: unknown };
  status?: { phase?: string; [key: string]: unknown };
}

/** A Kubernetes list. */
export interface List<T> {
  items: T[];
  metadata?: { resourceVersion?: string };
}

/** An RFC 6902 operation. */
export type JsonPatchOp =
  | { op: "add" | "replace" | "test"; path: string; value: unknown }
  | { op: "remove"; path: string };

/** VMI phases after which nothing runs any more (`vmi.IsFinal()`). */
export function isFinalPhase(phase: string | undefined): boolean {
  return phase === "Succeeded" || phase === "Failed";
}

/** True when `conditions` has `type` (any status) or, with `status`, that exact status. */
export function hasCondition(conditions: readonly Condition[] | undefined, type: string, status?: string): boolean {
  return (conditions ?? []).some((c) => c.type === type && (status === undefined || c.status === status));
}
