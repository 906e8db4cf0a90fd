import { describe, expect, it } from "vitest";
import { decodeStrict } from "../strict-decode.ts";
import type { KubeVirt } from "../types.ts";
import { activeKubeVirt, emulationAllowed, networkSettings } from "./cluster-config.ts";

const kv = (namespace: string, created: string, extra: Partial<KubeVirt["metadata"]> = {}): KubeVirt => ({
  apiVersion: "kubevirt.io/v1",
  kind: "KubeVirt",
  metadata: { name: "kubevirt", namespace, creationTimestamp: created, ...extra },
  spec: { configuration: { developerConfiguration: { useEmulation: namespace === "a" } } },
});

describe("the KubeVirt CR as the cluster configuration", () => {
  it("takes the oldest CR that is not being deleted, in the install namespace when given", () => {
    const a = kv("a", "2026-01-02T00:00:00Z");
    const b = kv("b", "2026-01-01T00:00:00Z");
    const gone = kv("c", "2025-01-01T00:00:00Z", { deletionTimestamp: "2026-01-03T00:00:00Z" });
    expect(activeKubeVirt([a, b, gone])).toBe(b);
    expect(activeKubeVirt([a, b, gone], "a")).toBe(a);
    expect(activeKubeVirt([gone])).toBeUndefined();
    expect(activeKubeVirt([])).toBeUndefined();
  });

  it.each([
    [undefined, false],
    [{}, false],
    [{ developerConfiguration: {} }, false],
    [{ developerConfiguration: { useEmulation: false } }, false],
    [{ developerConfiguration: { useEmulation: true } }, true],
  ])("useEmulation of %j is %s (KubeVirt's default: not allowed)", (config, allowed) => {
    expect(emulationAllowed(config)).toBe(allowed);
  });

  it("keeps KubeVirt's other configuration fields and still checks the declared ones", () => {
    const manifest = {
      apiVersion: "kubevirt.io/v1",
      kind: "KubeVirt",
      metadata: { name: "kubevirt", namespace: "kubevirt" },
      spec: {
        certificateRotateStrategy: {},
        imagePullPolicy: "IfNotPresent",
        workloadUpdateStrategy: { workloadUpdateMethods: ["LiveMigrate"] },
        configuration: {
          developerConfiguration: { featureGates: ["Sidecar"], useEmulation: true, logVerbosity: { virtLauncher: 2 } },
          migrations: { parallelMigrationsPerCluster: 3 },
          network: { defaultNetworkInterface: "bridge" },
        },
      },
    };
    expect(decodeStrict("KubeVirt", manifest).causes).toEqual([]);
    const wrong = structuredClone(manifest) as unknown as { spec: { configuration: Record<string, unknown> } };
    wrong.spec.configuration.developerConfiguration = { useEmulation: "yes" };
    expect(decodeStrict("KubeVirt", wrong).causes.map((c) => c.field)).toEqual([
      "spec.configuration.developerConfiguration.useEmulation",
    ]);
  });

  it.each([
    [undefined, "bridge", true],
    [{}, "bridge", true],
    [{ network: { defaultNetworkInterface: "masquerade" } }, "masquerade", true],
    [{ network: { permitBridgeInterfaceOnPodNetwork: false } }, "bridge", false],
    [{ network: { defaultNetworkInterface: 7, permitBridgeInterfaceOnPodNetwork: "no" } }, "bridge", true],
  ])("networkSettings(%j) is %s, bridge permitted %s (KubeVirt's defaults)", (config, binding, permit) => {
    expect(networkSettings(config as never)).toEqual({
      defaultNetworkInterface: binding,
      permitBridgeInterfaceOnPodNetwork: permit,
    });
  });
});
