/**
 * The node controller (KubeVirt `watch/node`): a node whose virt-handler heartbeat (annotation
 * `kubevirt.io/heartbeat`) is older than 5 minutes is marked `kubevirt.io/schedulable=false`, and its VMIs that
 * have no live launcher pod are Failed with reason NodeUnresponsive. Healthy nodes are looked at again when their
 * heartbeat would expire.
 */
import {
  ANNOTATION,
  keyOf,
  LABEL,
  type ObjectKey,
  objectKey,
  REASON,
  splitKey,
  type VirtualMachineInstance,
} from "@kvt/api";
import {
  done,
  type EventSink,
  type InformerHandlers,
  type Node,
  type Pod,
  type ReconcileContext,
  type Reconciler,
  type ResourceClient,
  type Result,
  requeueAfter,
} from "@kvt/kube";
import { livePods } from "../vmi/vmi-status.ts";

/** Heartbeats older than this mark a node unresponsive. */
export const HEARTBEAT_TIMEOUT_MS = 5 * 60_000;

/** What the node controller needs. */
export interface NodeControllerDeps {
  readonly nodes: { get(key: ObjectKey): Node | undefined };
  readonly vmisOnNode: (node: string) => VirtualMachineInstance[];
  readonly podsOfVmi: (vmiUid: string) => Pod[];
  readonly nodeClient: Pick<ResourceClient<Node>, "patch">;
  readonly vmiClient: Pick<ResourceClient<VirtualMachineInstance>, "patch">;
  readonly recorder: EventSink;
  readonly now?: () => number;
}

/** Reconciles Nodes. */
export class NodeController implements Reconciler {
  readonly #d: NodeControllerDeps;
  constructor(deps: NodeControllerDeps) {
    this.#d = deps;
  }

  /** Node changes enqueue the node; a VMI landing on a node enqueues that node. */
  handlers(enqueue: (key: ObjectKey) => void): {
    node: InformerHandlers<Node>;
    vmi: InformerHandlers<VirtualMachineInstance>;
  } {
    const forVmi = (v: VirtualMachineInstance): void => {
      if (v.status?.nodeName) enqueue(objectKey(undefined, v.status.nodeName));
    };
    return {
      node: { onAdd: (n) => enqueue(keyOf(n)), onUpdate: (_o, n) => enqueue(keyOf(n)) },
      vmi: { onAdd: forVmi, onUpdate: (_o, v) => forVmi(v) },
    };
  }

  async reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<Result> {
    const node = this.#d.nodes.get(key);
    const name = splitKey(key).name;
    const now = (this.#d.now ?? Date.now)();
    const heartbeat = node?.metadata?.annotations?.[ANNOTATION.heartbeat];
    const managed = node?.metadata?.labels?.[LABEL.schedulable] !== undefined;
    if (node && (!heartbeat || !managed)) return done(); // no virt-handler has ever run there
    const age = node ? now - Date.parse(heartbeat!) : Number.POSITIVE_INFINITY;
    if (age < HEARTBEAT_TIMEOUT_MS) return requeueAfter(HEARTBEAT_TIMEOUT_MS - age + 1000);
    if (node && node.metadata?.labels?.[LABEL.schedulable] !== "false") {
      await this.#d.nodeClient.patch("", name, [
        { op: "test", path: "/metadata/labels", value: node.metadata?.labels ?? {} },
        { op: "add", path: "/metadata/labels", value: { ...node.metadata?.labels, [LABEL.schedulable]: "false" } },
      ]);
      ctx.logger.warn({ node: name, heartbeat }, "virt-handler heartbeat expired; node marked unschedulable");
    }
    for (const vmi of this.#d.vmisOnNode(name)) {
      const phase = vmi.status?.phase;
      if (phase === "Succeeded" || phase === "Failed" || vmi.metadata?.deletionTimestamp) continue;
      const alive = livePods(this.#d.podsOfVmi(vmi.metadata?.uid ?? "")).some((p) => p.spec?.nodeName === name);
      if (alive) continue;
      await this.#d.vmiClient.patch(vmi.metadata?.namespace ?? "", vmi.metadata?.name ?? "", [
        { op: "test", path: "/status/phase", value: phase ?? "" },
        { op: "replace", path: "/status/phase", value: "Failed" },
        { op: "add", path: "/status/reason", value: REASON.NodeUnresponsive },
      ]);
      this.#d.recorder.event(
        vmi,
        "Warning",
        REASON.NodeUnresponsive,
        `virt-handler on node ${name} is not responsive, marking VMI as failed`,
      );
      ctx.logger.warn({ node: name, vmi: vmi.metadata?.name }, "VMI failed: node unresponsive");
    }
    return done();
  }
}
