import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import type { KubeObject } from "../types.ts";
import { defaultPod, imageTag, podQosClass } from "./pod-defaults.ts";

// A pod using each defaulted field, and the spec and status kube-apiserver v1.37.2 stored for it
// (`kubectl create --dry-run=server -o json`), less priority and preemptionPolicy (the Priority admission plugin,
// which this server does not run; see tools/kube/README.md).
const POD = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "defaults", namespace: "default" },
  spec: {
    containers: [
      {
        name: "compute",
        image: "kubevirt-ts/virt-launcher",
        ports: [{ containerPort: 8080 }],
        env: [{ name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } }],
        resources: { requests: { cpu: "100m", memory: "160Mi" }, limits: { "devices.kubevirt.io/kvm": "1" } },
        readinessProbe: { httpGet: { port: 8080 } },
        livenessProbe: { exec: { command: ["true"] }, periodSeconds: 5 },
      },
      {
        name: "sidecar",
        image: "registry.local:5000/tools/busybox:1.35.0",
        resources: { limits: { cpu: "15m", memory: "60M" } },
      },
      { name: "pinned", image: "busybox@sha256:0000000000000000000000000000000000000000000000000000000000000000" },
    ],
    initContainers: [{ name: "init", image: "busybox:latest", resources: { limits: { memory: "10Mi" } } }],
    volumes: [
      { name: "plain" },
      { name: "s", secret: { secretName: "x" } },
      { name: "c", configMap: { name: "y" } },
      { name: "d", downwardAPI: { items: [{ path: "labels", fieldRef: { fieldPath: "metadata.labels" } }] } },
      {
        name: "p",
        projected: {
          sources: [
            { serviceAccountToken: { path: "token" } },
            { downwardAPI: { items: [{ path: "ns", fieldRef: { fieldPath: "metadata.namespace" } }] } },
          ],
        },
      },
      { name: "h", hostPath: { path: "/tmp" } },
    ],
    serviceAccountName: "default",
    automountServiceAccountToken: false,
    tolerations: [
      { key: "node.kubernetes.io/unreachable", operator: "Exists", effect: "NoExecute", tolerationSeconds: 60 },
    ],
  },
};
const KUBE_SPEC = {
  automountServiceAccountToken: false,
  containers: [
    {
      env: [{ name: "POD_NAME", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.name" } } }],
      image: "kubevirt-ts/virt-launcher",
      imagePullPolicy: "Always",
      livenessProbe: {
        exec: { command: ["true"] },
        failureThreshold: 3,
        periodSeconds: 5,
        successThreshold: 1,
        timeoutSeconds: 1,
      },
      name: "compute",
      ports: [{ containerPort: 8080, protocol: "TCP" }],
      readinessProbe: {
        failureThreshold: 3,
        httpGet: { path: "/", port: 8080, scheme: "HTTP" },
        periodSeconds: 10,
        successThreshold: 1,
        timeoutSeconds: 1,
      },
      resources: {
        limits: { "devices.kubevirt.io/kvm": "1" },
        requests: { cpu: "100m", "devices.kubevirt.io/kvm": "1", memory: "160Mi" },
      },
      terminationMessagePath: "/dev/termination-log",
      terminationMessagePolicy: "File",
    },
    {
      image: "registry.local:5000/tools/busybox:1.35.0",
      imagePullPolicy: "IfNotPresent",
      name: "sidecar",
      resources: { limits: { cpu: "15m", memory: "60M" }, requests: { cpu: "15m", memory: "60M" } },
      terminationMessagePath: "/dev/termination-log",
      terminationMessagePolicy: "File",
    },
    {
      image: "busybox@sha256:0000000000000000000000000000000000000000000000000000000000000000",
      imagePullPolicy: "IfNotPresent",
      name: "pinned",
      resources: {},
      terminationMessagePath: "/dev/termination-log",
      terminationMessagePolicy: "File",
    },
  ],
  dnsPolicy: "ClusterFirst",
  enableServiceLinks: true,
  initContainers: [
    {
      image: "busybox:latest",
      imagePullPolicy: "Always",
      name: "init",
      resources: { limits: { memory: "10Mi" }, requests: { memory: "10Mi" } },
      terminationMessagePath: "/dev/termination-log",
      terminationMessagePolicy: "File",
    },
  ],
  restartPolicy: "Always",
  schedulerName: "default-scheduler",
  securityContext: {},
  serviceAccount: "default",
  serviceAccountName: "default",
  terminationGracePeriodSeconds: 30,
  tolerations: [
    { effect: "NoExecute", key: "node.kubernetes.io/unreachable", operator: "Exists", tolerationSeconds: 60 },
    { effect: "NoExecute", key: "node.kubernetes.io/not-ready", operator: "Exists", tolerationSeconds: 300 },
  ],
  volumes: [
    { emptyDir: {}, name: "plain" },
    { name: "s", secret: { defaultMode: 420, secretName: "x" } },
    { configMap: { defaultMode: 420, name: "y" }, name: "c" },
    {
      downwardAPI: {
        defaultMode: 420,
        items: [{ fieldRef: { apiVersion: "v1", fieldPath: "metadata.labels" }, path: "labels" }],
      },
      name: "d",
    },
    {
      name: "p",
      projected: {
        defaultMode: 420,
        sources: [
          { serviceAccountToken: { expirationSeconds: 3600, path: "token" } },
          { downwardAPI: { items: [{ fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" }, path: "ns" }] } },
        ],
      },
    },
    { hostPath: { path: "/tmp", type: "" }, name: "h" },
  ],
};
const KUBE_STATUS = { phase: "Pending", qosClass: "Burstable" };

describe("Pod defaults at the API", () => {
  let api: ApiServerHandle;
  beforeAll(async () => {
    api = await startApiServer({ inMemory: true, tls: false });
  });
  afterAll(async () => {
    await api?.stop();
  });

  it("stores what kube-apiserver stores for the same pod (defaults, DefaultTolerationSeconds, QoS class)", async () => {
    const res = await fetch(`${api.url}/api/v1/namespaces/default/pods`, {
      method: "POST",
      headers: { Authorization: `Bearer ${api.token}`, "Content-Type": "application/json" },
      body: JSON.stringify(POD),
    });
    expect(res.status).toBe(201);
    const stored = (await res.json()) as KubeObject;
    expect(stored.spec).toEqual(KUBE_SPEC);
    expect(stored.status).toEqual(KUBE_STATUS);
  });
});

describe("defaultPod", () => {
  it("keeps what is set", () => {
    const pod = {
      metadata: { name: "p" },
      spec: {
        containers: [
          { name: "c", image: "i", imagePullPolicy: "Never", terminationMessagePolicy: "FallbackToLogsOnError" },
        ],
        enableServiceLinks: false,
        securityContext: { runAsUser: 107 },
        serviceAccount: "legacy",
      },
    } as KubeObject;
    defaultPod(pod);
    expect(pod.spec).toMatchObject({
      containers: [{ imagePullPolicy: "Never", terminationMessagePolicy: "FallbackToLogsOnError" }],
      enableServiceLinks: false,
      securityContext: { runAsUser: 107 },
      serviceAccountName: "legacy",
      serviceAccount: "legacy",
    });
  });

  it("reads an image's tag as kube's ParseImageName does", () => {
    expect(imageTag("busybox")).toBe("latest");
    expect(imageTag("busybox:1.35")).toBe("1.35");
    expect(imageTag("localhost:5000/busybox")).toBe("latest");
    expect(imageTag("localhost:5000/busybox:latest")).toBe("latest");
    expect(imageTag("busybox@sha256:00")).toBe("");
    expect(imageTag("busybox:1.35@sha256:00")).toBe("1.35");
  });
});

describe("podQosClass", () => {
  const pod = (spec: Record<string, unknown>) => ({ metadata: { name: "p" }, spec }) as KubeObject;
  const c = (resources: Record<string, unknown>) => ({ name: "c", image: "i", resources });
  it.each([
    ["nothing requested", [c({})], "BestEffort"],
    [
      "only extended resources",
      [c({ requests: { "devices.kubevirt.io/kvm": "1" }, limits: { "devices.kubevirt.io/kvm": "1" } })],
      "BestEffort",
    ],
    ["zero requests", [c({ requests: { cpu: "0", memory: "0" } })], "BestEffort"],
    ["a cpu request", [c({ requests: { cpu: "100m" } })], "Burstable"],
    [
      "limits equal to requests for cpu and memory",
      [c({ requests: { cpu: "1", memory: "1Gi" }, limits: { cpu: "1000m", memory: "1024Mi" } })],
      "Guaranteed",
    ],
    [
      "a memory limit only",
      [c({ requests: { cpu: "1", memory: "1Gi" }, limits: { cpu: "1", memory: "2Gi" } })],
      "Burstable",
    ],
    [
      "one container without limits",
      [c({ requests: { cpu: "1", memory: "1Gi" }, limits: { cpu: "1", memory: "1Gi" } }), c({})],
      "Burstable",
    ],
  ])("%s: %s", (_, containers, want) => {
    const p = pod({ containers });
    defaultPod(p);
    expect(podQosClass(p)).toBe(want);
  });

  it("takes pod-level resources when the pod sets them", () => {
    const p = pod({ resources: { limits: { cpu: "2", memory: "2Gi" } }, containers: [c({ requests: { cpu: "1" } })] });
    expect(podQosClass(p)).toBe("Burstable");
    const g = pod({
      resources: { requests: { cpu: "2", memory: "2Gi" }, limits: { cpu: "2", memory: "2Gi" } },
      containers: [c({})],
    });
    expect(podQosClass(g)).toBe("Guaranteed");
  });
});
