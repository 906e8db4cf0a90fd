/**
 * The Deployments (virt-api, virt-controller), the virt-handler DaemonSet, their Services, PodDisruptionBudgets and
 * the priority class, with the ports, paths and flags the apps serve and read (each app's main.ts and `--help`).
 *
 * Certificates: the pods mount KubeVirt's certificate Secrets by KubeVirt's names and at KubeVirt's paths
 * (`kubevirt-virt-api-certs`, `kubevirt-virt-handler-certs`, `kubevirt-virt-handler-server-certs`), which the
 * virt-controller leader's certificate manager creates and renews before they expire (the KubeVirt CR's
 * certificateRotateStrategy; the apps reload them without a restart). The CA bundle they trust, ConfigMap
 * `kubevirt-ca`, is not mounted: virt-api and virt-handler follow it through a watch, as KubeVirt's do, so a rotated
 * CA is trusted before any certificate it signed is presented. The front-proxy CA is ConfigMap
 * `kubevirt-requestheader-ca`, a copy of kube-system/extension-apiserver-authentication's
 * `requestheader-client-ca-file`. virt-api and virt-handler wait in ContainerCreating until their Secrets exist.
 *
 * Listening: every server binds the pod IP (`$(POD_IP)` from the downward API), never 0.0.0.0.
 */
import { type Component, commonLabels, imageName, type KubeObject } from "./objects.ts";
import { RULES } from "./rbac.ts";

/** KubeVirt's priority class for its control plane and node agents. */
export const PRIORITY_CLASS = "kubevirt-cluster-critical";

/** The ports each app listens on (flags set explicitly below so a default change in an app cannot drift silently). */
export const PORTS = {
  /** virt-api: webhooks, subresources and /healthz over HTTPS (main.ts --port, default 8443). */
  virtApi: 8443,
  /** virt-api: /metrics, /healthz, /readyz (main.ts --metrics-port; off unless set). */
  virtApiMetrics: 8183,
  /** virt-controller: /metrics, /healthz, /readyz, /leader (main.ts --metrics-port, default 8182). */
  virtControllerMetrics: 8182,
  /** virt-handler: the server virt-api calls (pause, console, ...; main.ts --port, KubeVirt's 8186). */
  virtHandler: 8186,
  /** virt-handler: /metrics and /healthz (main.ts --metrics-port, default 8185). */
  virtHandlerMetrics: 8185,
} as const;

/** The `kubevirt.io: <component>` selector of a component's pods. */
function selectorOf(component: Component): Record<string, string> {
  return { "kubevirt.io": component };
}

/** Non-root, read-only root, no capabilities, no privilege escalation, the runtime's default seccomp filter. */
const RESTRICTED_CONTAINER = {
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  runAsNonRoot: true,
  capabilities: { drop: ["ALL"] },
  seccompProfile: { type: "RuntimeDefault" },
};

/** Pod-level: a fixed non-root uid/gid (the images need no particular user: node runs the bundle read-only). */
const RESTRICTED_POD = {
  runAsNonRoot: true,
  runAsUser: 1001,
  runAsGroup: 1001,
  fsGroup: 1001,
  seccompProfile: { type: "RuntimeDefault" },
};

const DOWNWARD_ENV = [
  { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
  { name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
  { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
];

/** Node writes nothing outside /tmp (V8 and pino need none); a small emptyDir keeps the root read-only. */
const TMP = { volume: { name: "tmp", emptyDir: { sizeLimit: "64Mi" } }, mount: { name: "tmp", mountPath: "/tmp" } };

function image(component: Component, version: string): string {
  return `${imageName(component)}:${version}`;
}

/** Spread the two replicas over nodes when there are several (a preference, so one-node clusters still run). */
function spreadOver(component: Component): Record<string, unknown> {
  return {
    podAntiAffinity: {
      preferredDuringSchedulingIgnoredDuringExecution: [
        {
          weight: 100,
          podAffinityTerm: {
            labelSelector: { matchLabels: selectorOf(component) },
            topologyKey: "kubernetes.io/hostname",
          },
        },
      ],
    },
  };
}

function deployment(
  component: Component,
  namespace: string,
  version: string,
  container: Record<string, unknown>,
  volumes: Record<string, unknown>[],
): KubeObject {
  const labels = commonLabels(component, version);
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: component, namespace, labels },
    spec: {
      // Two replicas: virt-api serves webhooks with failurePolicy Fail (one down must not block VM writes);
      // virt-controller keeps a warm standby that takes the Lease within its 15 s duration.
      replicas: 2,
      selector: { matchLabels: selectorOf(component) },
      strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1, maxSurge: 1 } },
      template: {
        metadata: { labels: { ...labels, "prometheus.kubevirt.io": "true" } },
        spec: {
          serviceAccountName: RULES[component].serviceAccount,
          priorityClassName: PRIORITY_CLASS,
          securityContext: RESTRICTED_POD,
          affinity: spreadOver(component),
          tolerations: [{ key: "CriticalAddonsOnly", operator: "Exists" }],
          containers: [
            { name: component, image: image(component, version), imagePullPolicy: "IfNotPresent", ...container },
          ],
          volumes: [TMP.volume, ...volumes],
        },
      },
    },
  };
}

/** virt-api: HTTPS on 8443 behind Service virt-api:443 (webhooks and the APIService), metrics on 8183. */
function virtApi(namespace: string, version: string): KubeObject {
  return deployment(
    "virt-api",
    namespace,
    version,
    {
      args: [
        "--port=8443",
        "--host=$(POD_IP)",
        "--tls-cert=/etc/virt-api/certificates/tls.crt",
        "--tls-key=/etc/virt-api/certificates/tls.key",
        "--namespace=$(POD_NAMESPACE)",
        // The aggregator's front proxy: trust X-Remote-* only from a client certificate this CA signed.
        "--requestheader-client-ca=/etc/virt-api/requestheader/requestheader-client-ca-file",
        "--requestheader-allowed-names=front-proxy-client",
        // The client certificate virt-handler accepts from virt-api (its CA bundle: ConfigMap kubevirt-ca, watched).
        "--handler-client-cert=/etc/virt-handler/clientcertificates/tls.crt",
        "--handler-client-key=/etc/virt-handler/clientcertificates/tls.key",
        `--metrics-port=${PORTS.virtApiMetrics}`,
        "--metrics-host=$(POD_IP)",
        // On SIGTERM (a drain, a rollout) it answers on, not ready, while its endpoint leaves the Service and the
        // API server's pooled connections move to the other replica (each closed after its next answer, or by the
        // 5 s keep-alive timeout): a webhook call then never meets a closed port.
        "--shutdown-delay-seconds=6",
      ],
      env: DOWNWARD_ENV,
      ports: [
        { name: "virt-api", containerPort: PORTS.virtApi, protocol: "TCP" },
        { name: "metrics", containerPort: PORTS.virtApiMetrics, protocol: "TCP" },
      ],
      // /healthz on the HTTPS port answers without a client certificate (server/routes.ts).
      readinessProbe: {
        httpGet: { path: "/healthz", port: PORTS.virtApi, scheme: "HTTPS" },
        initialDelaySeconds: 5,
        periodSeconds: 10,
      },
      livenessProbe: {
        httpGet: { path: "/healthz", port: PORTS.virtApi, scheme: "HTTPS" },
        initialDelaySeconds: 15,
        periodSeconds: 20,
        failureThreshold: 3,
      },
      resources: { requests: { cpu: "10m", memory: "150Mi" }, limits: { memory: "500Mi" } },
      securityContext: RESTRICTED_CONTAINER,
      volumeMounts: [
        TMP.mount,
        { name: "certificates", mountPath: "/etc/virt-api/certificates", readOnly: true },
        { name: "requestheader-ca", mountPath: "/etc/virt-api/requestheader", readOnly: true },
        { name: "handler-client", mountPath: "/etc/virt-handler/clientcertificates", readOnly: true },
      ],
    },
    [
      { name: "certificates", secret: { secretName: "kubevirt-virt-api-certs" } },
      { name: "requestheader-ca", configMap: { name: "kubevirt-requestheader-ca" } },
      { name: "handler-client", secret: { secretName: "kubevirt-virt-handler-certs" } },
    ],
  );
}

/** virt-controller: leader election on Lease <namespace>/virt-controller; /leader is ready only on the leader. */
function virtController(namespace: string, version: string): KubeObject {
  const port = PORTS.virtControllerMetrics;
  return deployment(
    "virt-controller",
    namespace,
    version,
    {
      // POD_NAME makes the Lease holder identity `<pod>_<pid>` (controller-process.ts).
      // --launcher-image: the launcher pods it renders run the release's launcher (an overlay that moves the images
      // to another registry changes this argument too, as virt-operator passes KubeVirt's registry on).
      args: [
        `--metrics-port=${port}`,
        "--metrics-host=$(POD_IP)",
        "--namespace=$(POD_NAMESPACE)",
        `--launcher-image=${imageName("virt-launcher")}:${version}`,
      ],
      env: DOWNWARD_ENV,
      ports: [{ name: "metrics", containerPort: port, protocol: "TCP" }],
      // /readyz, not KubeVirt's /leader: with a /leader readiness only the leader is ready, so the PDB
      // (minAvailable 1) would allow no eviction of it and a drain of its node would hang. A standby is ready to
      // take the Lease; /leader stays available to see who leads.
      readinessProbe: { httpGet: { path: "/readyz", port, scheme: "HTTP" }, initialDelaySeconds: 5, periodSeconds: 10 },
      livenessProbe: {
        httpGet: { path: "/healthz", port, scheme: "HTTP" },
        initialDelaySeconds: 15,
        periodSeconds: 20,
        failureThreshold: 3,
      },
      resources: { requests: { cpu: "10m", memory: "200Mi" }, limits: { memory: "800Mi" } },
      securityContext: RESTRICTED_CONTAINER,
      volumeMounts: [TMP.mount],
    },
    [],
  );
}

/**
 * virt-handler: one per node. Each privilege and host path, and why:
 * - privileged: the device plugins (device-manager/) follow the host's /dev/kvm, /dev/net/tun and /dev/vhost-net
 *   and open the last two so the kernel loads their modules; only a privileged container sees the host's device
 *   nodes. It also connects to launcher sockets owned by the launchers' users. (KubeVirt's virt-handler is
 *   privileged for the same reasons.)
 * - runAsUser 0: the launchers' socket files belong to the launchers; root may connect to all.
 * - hostPath /var/lib/kubelet/pods (Directory) at /pods, read-only: each launcher listens in its pod's `sockets`
 *   emptyDir, <pods>/<pod uid>/volumes/kubernetes.io~empty-dir/sockets/launcher-sock, where the handler finds it
 *   (main.ts --kubelet-pods-dir /pods). /pods, not the host's path, as KubeVirt's `kubelet-pods-shortened`: a unix
 *   socket path ends at 107 bytes and the host's path makes it 112. Read-only: connecting to a socket writes
 *   nothing. KubeVirt's handler also mounts /var/run/kubevirt; nothing of ours is there.
 * - hostPath /var/lib/kubelet/device-plugins (Directory): the kubelet's kubelet.sock, where the device plugins
 *   register, and their own sockets, which the kubelet dials (main.ts --device-plugins-dir). Only that directory,
 *   not KubeVirt's whole /var/lib/kubelet.
 * - hostPID (no hostNetwork): it plumbs each launcher pod's network (--wire-pod-network, as KubeVirt's handler):
 *   it finds the launcher's process in the node's /proc (its pod uid in /proc/<pid>/cgroup, its socket under
 *   /proc/<pid>/root) and enters /proc/<pid>/ns/net; the launcher, user 107 without capabilities, only serves DHCP.
 *   virt-api reaches it on the pod IP (PodHandlerLocator), and it signals launchers only through their sockets.
 *   With it (beyond KubeVirt), --clear-migrated-flows enters the node's network namespace (its parent's, the
 *   runtime's shim) and deletes the conntrack entries of flows to a pod address a VMI left in a live migration.
 */
/** The kubelet's device plugins directory on every node. */
const DEVICE_PLUGINS_DIR = "/var/lib/kubelet/device-plugins";
/** Where virt-handler mounts the kubelet's pods directory (KubeVirt's short `/pods`). */
const KUBELET_PODS_MOUNT = "/pods";

function virtHandler(namespace: string, version: string): KubeObject {
  const labels = commonLabels("virt-handler", version);
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name: "virt-handler", namespace, labels },
    spec: {
      selector: { matchLabels: selectorOf("virt-handler") },
      updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1 } },
      template: {
        metadata: { labels: { ...labels, "prometheus.kubevirt.io": "true" } },
        spec: {
          serviceAccountName: RULES["virt-handler"].serviceAccount,
          priorityClassName: PRIORITY_CLASS,
          tolerations: [{ key: "CriticalAddonsOnly", operator: "Exists" }],
          hostPID: true,
          containers: [
            {
              name: "virt-handler",
              image: image("virt-handler", version),
              imagePullPolicy: "IfNotPresent",
              args: [
                "--node-name=$(NODE_NAME)",
                `--kubelet-pods-dir=${KUBELET_PODS_MOUNT}`,
                `--device-plugins-dir=${DEVICE_PLUGINS_DIR}`,
                `--port=${PORTS.virtHandler}`,
                "--host=$(POD_IP)",
                `--metrics-port=${PORTS.virtHandlerMetrics}`,
                "--metrics-host=$(POD_IP)",
                "--tls-cert=/etc/virt-handler/servercertificates/tls.crt",
                "--tls-key=/etc/virt-handler/servercertificates/tls.key",
                "--wire-pod-network",
                "--clear-migrated-flows",
                // Only virt-api's client certificate, signed by a CA of ConfigMap kubevirt-ca (watched, not mounted),
                // may call pause, console, ...
              ],
              env: [{ name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } }, ...DOWNWARD_ENV],
              ports: [
                { name: "virt-handler", containerPort: PORTS.virtHandler, protocol: "TCP" },
                { name: "metrics", containerPort: PORTS.virtHandlerMetrics, protocol: "TCP" },
              ],
              readinessProbe: {
                httpGet: { path: "/healthz", port: PORTS.virtHandlerMetrics, scheme: "HTTP" },
                initialDelaySeconds: 5,
                periodSeconds: 10,
              },
              livenessProbe: {
                httpGet: { path: "/healthz", port: PORTS.virtHandlerMetrics, scheme: "HTTP" },
                initialDelaySeconds: 15,
                periodSeconds: 20,
                failureThreshold: 3,
              },
              resources: { requests: { cpu: "10m", memory: "250Mi" }, limits: { memory: "1Gi" } },
              securityContext: { privileged: true, runAsUser: 0, readOnlyRootFilesystem: true },
              volumeMounts: [
                TMP.mount,
                { name: "kubelet-pods-shortened", mountPath: KUBELET_PODS_MOUNT, readOnly: true },
                { name: "device-plugin", mountPath: DEVICE_PLUGINS_DIR },
                { name: "server-certs", mountPath: "/etc/virt-handler/servercertificates", readOnly: true },
              ],
            },
          ],
          volumes: [
            TMP.volume,
            { name: "kubelet-pods-shortened", hostPath: { path: "/var/lib/kubelet/pods", type: "Directory" } },
            { name: "device-plugin", hostPath: { path: DEVICE_PLUGINS_DIR, type: "Directory" } },
            { name: "server-certs", secret: { secretName: "kubevirt-virt-handler-server-certs" } },
          ],
        },
      },
    },
  };
}

function service(
  name: string,
  component: Component,
  namespace: string,
  version: string,
  spec: Record<string, unknown>,
  extraLabels: Record<string, string> = {},
): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name, namespace, labels: { ...commonLabels(component, version), ...extraLabels } },
    spec: { selector: selectorOf(component), ...spec },
  };
}

/** One headless metrics Service per component: the ServiceMonitor takes the job name from its `kubevirt.io` label. */
function metricsService(component: Component, port: number, namespace: string, version: string): KubeObject {
  return service(
    `${component}-metrics`,
    component,
    namespace,
    version,
    { clusterIP: "None", ports: [{ name: "metrics", port, targetPort: "metrics", protocol: "TCP" }] },
    { "prometheus.kubevirt.io": "true" },
  );
}

function pdb(component: Component, namespace: string, version: string): KubeObject {
  return {
    apiVersion: "policy/v1",
    kind: "PodDisruptionBudget",
    metadata: { name: `${component}-pdb`, namespace, labels: commonLabels(component, version) },
    spec: { minAvailable: 1, selector: { matchLabels: selectorOf(component) } },
  };
}

/** `kubevirt-cluster-critical`, as KubeVirt's operator creates it. */
export function priorityClass(version: string): KubeObject {
  return {
    apiVersion: "scheduling.k8s.io/v1",
    kind: "PriorityClass",
    metadata: { name: PRIORITY_CLASS, labels: commonLabels(undefined, version) },
    value: 1_000_000_000,
    globalDefault: false,
    preemptionPolicy: "PreemptLowerPriority",
    description: "This priority class should be used for KubeVirt core components only.",
  };
}

/** The workloads of one component with their Services and PDB. */
export function workloadObjects(component: Component, namespace: string, version: string): KubeObject[] {
  switch (component) {
    case "virt-api":
      return [
        virtApi(namespace, version),
        service("virt-api", "virt-api", namespace, version, {
          type: "ClusterIP",
          ports: [{ name: "https", port: 443, targetPort: "virt-api", protocol: "TCP" }],
        }),
        metricsService("virt-api", PORTS.virtApiMetrics, namespace, version),
        pdb("virt-api", namespace, version),
      ];
    case "virt-controller":
      return [
        virtController(namespace, version),
        metricsService("virt-controller", PORTS.virtControllerMetrics, namespace, version),
        pdb("virt-controller", namespace, version),
      ];
    case "virt-handler":
      return [
        virtHandler(namespace, version),
        metricsService("virt-handler", PORTS.virtHandlerMetrics, namespace, version),
      ];
  }
}
