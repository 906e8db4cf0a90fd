/**
 * KubeVirt's own example manifests of the replica kinds, unchanged: they decode strictly (no unknown field) and pass
 * the webhook rules, so `kubectl apply` takes them as KubeVirt does.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { decodeStrict } from "../strict-decode.ts";
import type { VirtualMachineInstanceReplicaSet, VirtualMachinePool } from "../types.ts";
import { validateVmirs, validateVmPool } from "../validation/replica-validation.ts";

const load = <T>(file: string): T => parse(readFileSync(new URL(file, import.meta.url), "utf8")) as T;

describe("KubeVirt's replica examples", () => {
  it("vmi-replicaset-cirros decodes strictly and validates", () => {
    const rs = load<VirtualMachineInstanceReplicaSet>("./vmi-replicaset-cirros.yaml");
    expect(decodeStrict("VirtualMachineInstanceReplicaSet", rs).unknownFields).toEqual([]);
    expect(validateVmirs(rs)).toEqual([]);
  });

  it("vm-pool-cirros decodes strictly and validates", () => {
    const pool = load<VirtualMachinePool>("./vm-pool-cirros.yaml");
    expect(pool.apiVersion).toBe("pool.kubevirt.io/v1beta1");
    expect(decodeStrict("VirtualMachinePool", pool).unknownFields).toEqual([]);
    expect(validateVmPool(pool, undefined)).toEqual([]);
  });
});
