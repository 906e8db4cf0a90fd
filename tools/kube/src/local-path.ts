/**
 * The lane's storage provisioner: Rancher's local-path-provisioner (built by `npm run kube -- build`, its image made
 * and pushed by `up` with the node images), installed by `up` once the nodes are Ready, as ADR 0007 says the
 * real-Kubernetes lane does. The objects are written here from the provisioner's documented fields, configured as the
 * local cluster's in-process provisioner behaves:
 *
 * ```
 *   Namespace local-path-storage
 *     ServiceAccount local-path-provisioner-service-account, Role (helper pods) + ClusterRole (claims, volumes,
 *       nodes, classes, events) and their bindings
 *     ConfigMap local-path-config   config.json {"sharedFileSystemPath": "<cluster-dir>/storage"}, setup, teardown,
 *                                    helperPod.yaml (the lane's busybox image)
 *     Deployment local-path-provisioner (1 replica; the config map mounted at /etc/config/)
 *   StorageClass local-path (default; rancher.io/local-path, WaitForFirstConsumer, reclaimPolicy Delete)
 * ```
 *
 * sharedFileSystemPath, not nodePathMap: every node of the lane is a mount namespace of this one machine, made from
 * the host's, so a directory under the cluster directory is the same directory on every node. The provisioner then
 * gives PVs no node affinity and takes ReadWriteMany claims (nodePathMap refuses them), as the local cluster does.
 * Each claim's directory `<cluster-dir>/storage/pvc-<uid>_<ns>_<name>` is made (0777) and removed by a helper pod
 * on the claim's selected node running the setup or teardown script.
 */
import { execFile } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { stringify } from "yaml";
import { LOCAL_PATH_VERSION } from "./versions.ts";

const exec = promisify(execFile);

/** The provisioner's namespace (its default `--namespace`). */
export const LOCAL_PATH_NAMESPACE = "local-path-storage";
/** The default StorageClass it serves. */
export const LOCAL_PATH_STORAGE_CLASS = "local-path";
/** The provisioner name claims of that class are provisioned by (its default `--provisioner-name`). */
export const LOCAL_PATH_PROVISIONER = "rancher.io/local-path";
/** Where the provisioner's binary sits in its image. */
export const LOCAL_PATH_BINARY = "/usr/bin/local-path-provisioner";

const NAME = "local-path-provisioner";
const SERVICE_ACCOUNT = "local-path-provisioner-service-account";
const ROLE = "local-path-provisioner-role";
const BINDING = "local-path-provisioner-bind";
const CONFIG_MAP = "local-path-config";
const CONFIG_DIR = "/etc/config/";

/** The image reference (without the registry) of the provisioner's image. */
export const LOCAL_PATH_IMAGE_REFERENCE = `kubevirt-ts/local-path-provisioner:${LOCAL_PATH_VERSION}`;

/** Where the claims' directories live under a cluster directory (the shared filesystem path). */
export const storageDir = (clusterDir: string): string => join(clusterDir, "storage");

export interface LocalPathOptions {
  /** The provisioner's image, registry included. */
  readonly image: string;
  /** The helper pods' image (a shell with mkdir and rm: the lane's busybox), registry included. */
  readonly helperImage: string;
  /** The directory every node shares, the claims' directories made under it (absolute). */
  readonly sharedPath: string;
}

type Manifest = Record<string, unknown>;

/** The provisioner's objects, in apply order (pure). */
export function localPathManifests(options: LocalPathOptions): Manifest[] {
  if (!options.sharedPath.startsWith("/") || options.sharedPath === "/") {
    throw new Error(`sharedPath must be an absolute directory other than /, got ${JSON.stringify(options.sharedPath)}`);
  }
  const namespaced = (name: string) => ({ name, namespace: LOCAL_PATH_NAMESPACE });
  const subjects = [{ kind: "ServiceAccount", name: SERVICE_ACCOUNT, namespace: LOCAL_PATH_NAMESPACE }];
  const rule = (apiGroups: string[], resources: string[], verbs: string[]) => ({ apiGroups, resources, verbs });
  const read = ["get", "list", "watch"];
  const labels = { app: NAME };
  return [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: LOCAL_PATH_NAMESPACE } },
    { apiVersion: "v1", kind: "ServiceAccount", metadata: namespaced(SERVICE_ACCOUNT) },
    {
      // Helper pods in its own namespace: created, watched until Succeeded, their logs read, deleted.
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: namespaced(ROLE),
      rules: [rule([""], ["pods"], [...read, "create", "patch", "update", "delete"])],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: ROLE },
      rules: [
        rule([""], ["nodes", "persistentvolumeclaims", "configmaps", "pods", "pods/log"], read),
        rule([""], ["persistentvolumes"], [...read, "create", "patch", "update", "delete"]),
        rule([""], ["events"], ["create", "patch"]),
        rule(["storage.k8s.io"], ["storageclasses"], read),
      ],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: namespaced(BINDING),
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: ROLE },
      subjects,
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: BINDING },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: ROLE },
      subjects,
    },
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: namespaced(CONFIG_MAP),
      data: {
        "config.json": JSON.stringify({ sharedFileSystemPath: options.sharedPath }, null, 2),
        // The helper pod runs these with VOL_DIR (the claim's directory as mounted in it), VOL_MODE and VOL_SIZE_BYTES.
        setup: '#!/bin/sh\nset -eu\nmkdir -m 0777 -p "$VOL_DIR"\n',
        teardown: '#!/bin/sh\nset -eu\nrm -rf "$VOL_DIR"\n',
        "helperPod.yaml": stringify(helperPodTemplate(options.helperImage)),
      },
    },
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { ...namespaced(NAME), labels },
      spec: {
        replicas: 1,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            serviceAccountName: SERVICE_ACCOUNT,
            containers: [
              {
                name: NAME,
                image: options.image,
                imagePullPolicy: "IfNotPresent",
                command: [LOCAL_PATH_BINARY, "--debug", "start", "--config", `${CONFIG_DIR}config.json`],
                args: ["--helper-image", options.helperImage],
                env: [
                  { name: "POD_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
                  // Where it re-reads helperPod.yaml from when the config map changes.
                  { name: "CONFIG_MOUNT_PATH", value: CONFIG_DIR },
                ],
                volumeMounts: [{ name: "config-volume", mountPath: CONFIG_DIR }],
              },
            ],
            volumes: [{ name: "config-volume", configMap: { name: CONFIG_MAP } }],
          },
        },
      },
    },
    {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: {
        name: LOCAL_PATH_STORAGE_CLASS,
        annotations: { "storageclass.kubernetes.io/is-default-class": "true" },
      },
      provisioner: LOCAL_PATH_PROVISIONER,
      volumeBindingMode: "WaitForFirstConsumer",
      reclaimPolicy: "Delete",
    },
  ];
}

/**
 * The helper pod the provisioner copies for each setup and teardown: it adds the name, node, volumes, command and
 * environment itself; this template gives the image and what lets it run on a node under pressure.
 */
function helperPodTemplate(image: string): Manifest {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "helper-pod" },
    spec: {
      priorityClassName: "system-node-critical",
      tolerations: [{ key: "node.kubernetes.io/disk-pressure", operator: "Exists", effect: "NoSchedule" }],
      containers: [{ name: "helper-pod", image, imagePullPolicy: "IfNotPresent" }],
    },
  };
}

/**
 * Applies the provisioner's objects with the release's `kubectl` (the manifests kept in
 * `<cluster-dir>/addons/local-path.yaml`) and waits until its Deployment has rolled out.
 */
export async function installLocalPath(
  kubectl: string,
  kubeconfig: string,
  clusterDir: string,
  options: LocalPathOptions,
  timeoutMs: number,
): Promise<void> {
  mkdirSync(options.sharedPath, { recursive: true });
  const addons = join(clusterDir, "addons");
  mkdirSync(addons, { recursive: true });
  const file = join(addons, "local-path.yaml");
  writeFileSync(
    file,
    localPathManifests(options)
      .map((m) => stringify(m))
      .join("---\n"),
  );
  const run = async (args: string[]): Promise<void> => {
    try {
      await exec(kubectl, ["--kubeconfig", kubeconfig, ...args], { timeout: timeoutMs + 10_000 });
    } catch (error) {
      const e = error as { stderr?: string; message: string };
      throw new Error(`kubectl ${args.join(" ")} failed: ${(e.stderr ?? e.message).trim()}`, { cause: error });
    }
  };
  await run(["apply", "-f", file]);
  const timeout = `--timeout=${Math.ceil(timeoutMs / 1000)}s`;
  await run(["-n", LOCAL_PATH_NAMESPACE, "rollout", "status", `deployment/${NAME}`, timeout]);
}
