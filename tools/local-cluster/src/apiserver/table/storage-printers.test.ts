import { describe, expect, it } from "vitest";
import type { KubeObject } from "../types.ts";
import { accessModesString, STORAGE_COLUMNS, storageClassName } from "./storage-printers.ts";

const columns = (coll: string) => STORAGE_COLUMNS.find(([c]) => c === coll)![1];
const cells = (coll: string, o: KubeObject): unknown[] =>
  columns(coll).map((c) => c.render!(o, Date.parse("2026-01-01T00:01:00Z")));

describe("storage printers", () => {
  it("prints access modes in Kubernetes' fixed order", () => {
    expect(accessModesString(["ReadWriteOncePod", "ReadWriteMany", "ReadWriteOnce"])).toBe("RWO,RWX,RWOP");
    expect(accessModesString(undefined)).toBe("");
  });

  it("prints a claim's capacity and modes only once it is bound", () => {
    const pending: KubeObject = {
      metadata: { name: "c", creationTimestamp: "2026-01-01T00:00:00Z" },
      spec: { storageClassName: "local-path", volumeMode: "Filesystem" },
      status: { phase: "Pending" },
    };
    expect(columns("core/persistentvolumeclaims").map((c) => c.name)).toEqual([
      "Status",
      "Volume",
      "Capacity",
      "Access Modes",
      "StorageClass",
      "VolumeAttributesClass",
      "Age",
      "VolumeMode",
    ]);
    expect(cells("core/persistentvolumeclaims", pending)).toEqual([
      "Pending",
      "",
      "",
      "",
      "local-path",
      "<unset>",
      "60s",
      "Filesystem",
    ]);
    const bound = {
      ...pending,
      spec: { ...(pending.spec as object), volumeName: "pv1" },
      status: { phase: "Bound", capacity: { storage: "1024Mi" }, accessModes: ["ReadWriteOnce"] },
    };
    expect(cells("core/persistentvolumeclaims", bound).slice(0, 4)).toEqual(["Bound", "pv1", "1Gi", "RWO"]);
  });

  it("prints a volume's claim as namespace/name and Terminating while it is deleted", () => {
    const pv: KubeObject = {
      metadata: { name: "pv1", creationTimestamp: "2026-01-01T00:00:00Z", deletionTimestamp: "2026-01-01T00:00:30Z" },
      spec: {
        capacity: { storage: "2Gi" },
        accessModes: ["ReadWriteMany"],
        persistentVolumeReclaimPolicy: "Retain",
        claimRef: { namespace: "ns", name: "c" },
        storageClassName: "manual",
      },
      status: { phase: "Bound" },
    };
    expect(cells("core/persistentvolumes", pv)).toEqual([
      "2Gi",
      "RWX",
      "Retain",
      "Terminating",
      "ns/c",
      "manual",
      "<unset>",
      "",
      "60s",
      "<unset>",
    ]);
  });

  it("marks the default StorageClass in its name", () => {
    const sc: KubeObject = {
      metadata: { name: "local-path", annotations: { "storageclass.kubernetes.io/is-default-class": "true" } },
    };
    expect(storageClassName(sc)).toBe("local-path (default)");
    expect(storageClassName({ metadata: { name: "other" } })).toBe("other");
  });
});
