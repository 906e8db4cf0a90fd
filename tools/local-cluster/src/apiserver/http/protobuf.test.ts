import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { decodeProtobuf } from "./protobuf.ts";

// client-go v0.37.2's protobuf serializer encoding a node Lease as kwok creates one (golden bytes from a Go program:
// coordinationv1.Lease{ownerReferences: [the Node], spec: holderIdentity, leaseDurationSeconds 40, acquireTime
// 2026-11-26T16:12:40.000005Z, renewTime 2026-11-26T16:12:46.938375818Z, leaseTransitions 2}).
const LEASE =
  "azhzAAofChZjb29yZGluYXRpb24uazhzLmlvL3YxEgVMZWFzZRKdAQptCg1rd29rLW5vZGUtMDAwEgAaD2t1YmUtbm9kZS1sZWFzZSIAKgAyADgAQgBqPwoETm9kZRoNa3dvay1ub2RlLTAwMCIkOGQxZjZmNTUtMGY1NS00YzFlLTlkNTctM2MxYjFkMWUwYTAxKgJ2MRIsCg1rd29rLW5vZGUtMDAwECgaCQj4tKHYBhCIJyIMCP60odgGENjuub8DKAIaACIA";

describe("decodeProtobuf", () => {
  it("decodes a coordination.k8s.io/v1 Lease, MicroTimes with their microseconds", () => {
    const lease = decodeProtobuf(Buffer.from(LEASE, "base64"));
    expect(lease).toMatchObject({
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: {
        name: "kwok-node-000",
        namespace: "kube-node-lease",
        ownerReferences: [
          { apiVersion: "v1", kind: "Node", name: "kwok-node-000", uid: "8d1f6f55-0f55-4c1e-9d57-3c1b1d1e0a01" },
        ],
      },
      spec: {
        holderIdentity: "kwok-node-000",
        leaseDurationSeconds: 40,
        acquireTime: "2026-11-26T16:12:40.000005Z",
        renewTime: "2026-11-26T16:12:46.938375Z",
        leaseTransitions: 2,
      },
    });
  });
});

describe("a protobuf Lease at the API", () => {
  let api: ApiServerHandle;
  beforeAll(async () => {
    api = await startApiServer({ inMemory: true, tls: false });
  });
  afterAll(async () => {
    await api?.stop();
  });

  it("is created in kube-node-lease as kube-apiserver creates it (kwok's node heartbeat)", async () => {
    const headers = { Authorization: `Bearer ${api.token}` };
    const created = await fetch(`${api.url}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases`, {
      method: "POST",
      headers: { ...headers, "Content-Type": "application/vnd.kubernetes.protobuf" },
      body: Buffer.from(LEASE, "base64"),
    });
    expect(created.status).toBe(201);
    // The answer is the stored object (the garbage collector soon deletes it: its owner Node does not exist here).
    const got = (await created.json()) as { spec: Record<string, unknown> };
    expect(got.spec).toMatchObject({ holderIdentity: "kwok-node-000", renewTime: "2026-11-26T16:12:46.938375Z" });
  });
});
