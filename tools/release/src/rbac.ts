/**
 * Least-privilege RBAC per component, derived from what each app's code calls (its informers: list + watch; its
 * clients: the verbs below). Every rule names the code path that needs it; a rule no code path needs does not belong
 * here. Cluster-wide rules go in a ClusterRole, rules on the install namespace (leases, virt-handler pods) in a Role.
 *
 * | component       | ServiceAccount        | ClusterRole / Role     |
 * | --------------- | --------------------- | ---------------------- |
 * | virt-api        | kubevirt-apiserver    | kubevirt-apiserver     |
 * | virt-controller | kubevirt-controller   | kubevirt-controller    |
 * | virt-handler    | kubevirt-handler      | kubevirt-handler       |
 *
 * The ServiceAccount names are KubeVirt's; virt-api's admitters trust exactly these (`isKubevirtServiceAccount`).
 */
import { CA_BUNDLE_TARGETS, CERTIFICATES } from "@kvt/api";
import { type Component, commonLabels, type KubeObject } from "./objects.ts";

/** One RBAC rule plus the code path that needs it (rendered as a YAML comment). */
export interface Rule {
  readonly apiGroups: readonly string[];
  readonly resources: readonly string[];
  readonly verbs: readonly string[];
  readonly resourceNames?: readonly string[];
  /** Where the code makes these calls (`file: call`). */
  readonly why: string;
}

/** The rules of one component: cluster-wide, and in the install namespace. */
export interface ComponentRules {
  readonly serviceAccount: string;
  readonly cluster: readonly Rule[];
  readonly namespaced: readonly Rule[];
}

const KV = "kubevirt.io";
const CERT_MANAGER = "certificates/cert-manager.ts";
const INFORMER = ["list", "watch"] as const;

/**
 * virt-controller: the leader's informers and controllers (apps/virt-controller/src/app.ts), leader election, and
 * the certificate manager (virt-operator's certificate duty: the KubeVirt CA, the components' Secrets, caBundles).
 */
const controller: ComponentRules = {
  serviceAccount: "kubevirt-controller",
  cluster: [
    {
      apiGroups: [KV],
      resources: ["virtualmachines"],
      verbs: [...INFORMER, "patch", "create", "delete", "update"],
      why:
        "app.ts: VM informer; vm/vm-controller.ts: vmClient.patch (finalizer, printable status ops); " +
        "pool/pool-controller.ts: vmClient.create/delete (scale out and in), patch (pool finalizer, release); " +
        "pool/pool-updater.ts: vmClient.update (a VM brought to the pool's template), delete (data volumes changed)",
    },
    {
      apiGroups: [KV],
      resources: ["virtualmachineinstancereplicasets"],
      verbs: [...INFORMER, "get"],
      why: "app.ts: VMIRS informer; replicaset/replicaset-controller.ts: rsClient.get (fresh read before an adoption)",
    },
    {
      apiGroups: [KV],
      resources: ["virtualmachineinstancereplicasets/status"],
      verbs: ["patch"],
      why: 'replicaset/replicaset-controller.ts: rsClient.patch(ns, name, ops, "status")',
    },
    {
      apiGroups: ["pool.kubevirt.io"],
      resources: ["virtualmachinepools"],
      verbs: [...INFORMER, "patch"],
      why: "app.ts: VirtualMachinePool informer; pool/pool-controller.ts: poolClient.patch (pool finalizer)",
    },
    {
      apiGroups: ["pool.kubevirt.io"],
      resources: ["virtualmachinepools/status"],
      verbs: ["patch"],
      why: 'pool/pool-controller.ts: poolClient.patch(ns, name, ops, "status")',
    },
    {
      apiGroups: ["pool.kubevirt.io"],
      resources: ["virtualmachinepools/finalizers"],
      verbs: ["update"],
      why: "pool/pool-plan.ts: pool VMs carry an ownerReference with blockOwnerDeletion (OwnerReferencesPermissionEnforcement)",
    },
    {
      apiGroups: [KV],
      resources: ["virtualmachines/status"],
      verbs: ["patch"],
      why: 'vm/vm-controller.ts: vmClient.patch(ns, name, ops, "status")',
    },
    {
      apiGroups: ["instancetype.kubevirt.io"],
      resources: [
        "virtualmachineinstancetypes",
        "virtualmachineclusterinstancetypes",
        "virtualmachinepreferences",
        "virtualmachineclusterpreferences",
      ],
      verbs: ["get"],
      why: "vm/instancetype-sync.ts: clientFor(kind).get (the instancetype or preference a VM references)",
    },
    {
      apiGroups: ["instancetype.kubevirt.io"],
      resources: ["virtualmachineclusterinstancetypes", "virtualmachineclusterpreferences"],
      verbs: [...INFORMER, "create", "update", "delete"],
      why:
        "kubevirt/common-instancetypes.ts: informers, and create/update/delete of the common-instancetypes bundle " +
        "(virt-operator's commonInstancetypesDeployment: restore an edited one, remove them when disabled)",
    },
    {
      apiGroups: ["apps"],
      resources: ["controllerrevisions"],
      verbs: ["get", "create", ...INFORMER, "delete"],
      why:
        "vm/instancetype-sync.ts: clientFor(controllerrevisions).get/create (the revision a VM is pinned to); " +
        "app.ts: revision informer; pool/pool-updater.ts: revisionClient.create (<pool>-<generation>), delete (prune)",
    },
    {
      apiGroups: [KV],
      resources: ["virtualmachineinstances"],
      verbs: [...INFORMER, "create", "delete", "patch", "update"],
      why:
        "app.ts: VMI informer; vm/vm-controller.ts: vmiClient.create/delete/patch (adoption); " +
        "vmi/vmi-controller.ts: vmiClient.update (the VMI CRD has no status subresource); " +
        "migration/migration-controller.ts, node/node-controller.ts: vmiClient.patch",
    },
    {
      apiGroups: [KV],
      resources: [
        "virtualmachines/finalizers",
        "virtualmachineinstances/finalizers",
        "virtualmachineinstancereplicasets/finalizers",
      ],
      verbs: ["update"],
      why:
        "vm/vmi-template.ts, vmi/pod-template.ts and replicaset/replicaset-plan.ts: VMIs and launcher Pods carry " +
        "an ownerReference with " +
        "blockOwnerDeletion, which the OwnerReferencesPermissionEnforcement admission plugin allows only to " +
        "whoever may update the owner's finalizers",
    },
    {
      apiGroups: [KV],
      resources: ["virtualmachineinstancemigrations"],
      verbs: [...INFORMER, "create", "delete", "patch"],
      why:
        "app.ts: VMIM informer; evacuation/evacuation-controller.ts: migrationClient.create; " +
        "migration/migration-controller.ts: migrationClient.patch (finalizer) and delete (GC of finalized VMIMs)",
    },
    {
      apiGroups: [KV],
      resources: ["virtualmachineinstancemigrations/status"],
      verbs: ["patch"],
      why: 'migration/migration-controller.ts: migrationClient.patch(ns, name, ops, "status")',
    },
    {
      apiGroups: [KV],
      resources: ["kubevirts"],
      verbs: [...INFORMER],
      why:
        "app.ts: KubeVirt informer (spec.configuration: useEmulation, migrations; spec.certificateRotateStrategy " +
        "for certificates/cert-manager.ts)",
    },
    {
      apiGroups: ["migrations.kubevirt.io"],
      resources: ["migrationpolicies"],
      verbs: [...INFORMER],
      why: "app.ts: MigrationPolicy informer (migration/migration-controller.ts policies())",
    },
    {
      apiGroups: [""],
      resources: ["pods"],
      verbs: [...INFORMER, "create", "delete"],
      why:
        "app.ts: launcher Pod informer (kubevirt.io=virt-launcher); vmi/vmi-controller.ts: podClient.create/delete; " +
        "migration/migration-controller.ts: podClient.create (target pod)",
    },
    {
      apiGroups: [""],
      resources: ["nodes"],
      verbs: [...INFORMER, "patch"],
      why: "app.ts: Node informer; node/node-controller.ts: nodeClient.patch (schedulable label of a dead handler's node)",
    },
    {
      apiGroups: [""],
      resources: ["persistentvolumeclaims"],
      verbs: [...INFORMER],
      why: "app.ts: PVC informer (a VMI waits for its claims; volumeStatus)",
    },
    {
      apiGroups: [""],
      resources: ["namespaces"],
      verbs: ["get", ...INFORMER],
      why:
        "app.ts: Namespace informer (MigrationPolicy namespaceSelector); controller-process.ts: ensureNamespace get " +
        "(deploy/ creates the namespace, so its create branch never runs and needs no rule)",
    },
    {
      apiGroups: [""],
      resources: ["events"],
      verbs: ["create", "patch"],
      why: "libs/kube event-recorder.ts: events.create, events.mergePatch (count of a repeated event)",
    },
    {
      apiGroups: ["admissionregistration.k8s.io"],
      resources: ["mutatingwebhookconfigurations"],
      resourceNames: [...CA_BUNDLE_TARGETS.mutatingWebhookConfigurations],
      verbs: ["get", "update"],
      why: `${CERT_MANAGER}: get and update of virt-api's webhook configuration (caBundle = the KubeVirt CA bundle)`,
    },
    {
      apiGroups: ["admissionregistration.k8s.io"],
      resources: ["validatingwebhookconfigurations"],
      resourceNames: [...CA_BUNDLE_TARGETS.validatingWebhookConfigurations],
      verbs: ["get", "update"],
      why: `${CERT_MANAGER}: get and update of virt-api's webhook configuration (caBundle = the KubeVirt CA bundle)`,
    },
    {
      apiGroups: ["apiregistration.k8s.io"],
      resources: ["apiservices"],
      resourceNames: [...CA_BUNDLE_TARGETS.apiServices],
      verbs: ["get", "update"],
      why: `${CERT_MANAGER}: get and update of the subresources.kubevirt.io APIServices (spec.caBundle)`,
    },
  ],
  namespaced: [
    {
      apiGroups: [""],
      resources: ["secrets"],
      verbs: ["create"],
      why:
        `${CERT_MANAGER}: secrets.create of a missing certificate Secret (create cannot be limited by name; the ` +
        "Role limits it to the install namespace)",
    },
    {
      apiGroups: [""],
      resources: ["secrets"],
      resourceNames: [
        CERTIFICATES.caSecret,
        CERTIFICATES.virtApi,
        CERTIFICATES.handlerServer,
        CERTIFICATES.handlerClient,
      ],
      verbs: ["get", "update"],
      why: `${CERT_MANAGER}: secrets.get and update (renewal) of the KubeVirt CA's and the components' Secrets only`,
    },
    {
      apiGroups: [""],
      resources: ["configmaps"],
      verbs: ["create"],
      why: `${CERT_MANAGER}: configMaps.create of ConfigMap kubevirt-ca when missing (create cannot be limited by name)`,
    },
    {
      apiGroups: [""],
      resources: ["configmaps"],
      resourceNames: [CERTIFICATES.caConfigMap],
      verbs: ["get", "update"],
      why: `${CERT_MANAGER}: configMaps.get and update of ConfigMap kubevirt-ca (ca-bundle)`,
    },
    {
      apiGroups: ["coordination.k8s.io"],
      resources: ["leases"],
      verbs: ["create"],
      why: "libs/kube leader-election.ts: leases.create of Lease virt-controller (create cannot be limited by name)",
    },
    {
      apiGroups: ["coordination.k8s.io"],
      resources: ["leases"],
      resourceNames: ["virt-controller"],
      verbs: ["get", "update"],
      why: "libs/kube leader-election.ts: leases.get and leases.update (renew, release) of Lease virt-controller",
    },
    {
      apiGroups: ["apps"],
      resources: ["deployments"],
      resourceNames: ["virt-api", "virt-controller"],
      verbs: ["get"],
      why: "kubevirt/kubevirt-status.ts: deployments.get of the components' Deployments (the CR's Available condition)",
    },
    {
      apiGroups: ["apps"],
      resources: ["daemonsets"],
      resourceNames: ["virt-handler"],
      verbs: ["get"],
      why: "kubevirt/kubevirt-status.ts: daemonSets.get of DaemonSet virt-handler (the CR's Available condition)",
    },
    {
      apiGroups: [KV],
      resources: ["kubevirts/status"],
      verbs: ["update"],
      why: "kubevirt/kubevirt-status.ts: kubevirts.updateStatus (phase; Available, Progressing, Degraded, Created)",
    },
  ],
};

/**
 * virt-handler: one VMI informer, status patches, node heartbeat (handler-app.ts). No Secret: its certificates come
 * as volumes, and a migration's secret goes from the target's handler to the source's over their mutual TLS
 * (migration/migration-secrets.ts), never through the API server.
 */
const handler: ComponentRules = {
  serviceAccount: "kubevirt-handler",
  cluster: [
    {
      apiGroups: [KV],
      resources: ["virtualmachineinstances"],
      verbs: [...INFORMER, "patch"],
      why: "handler-app.ts: VMI informer; writer.patchStatus = vmis.patch (no status subresource on VMIs)",
    },
    {
      apiGroups: [""],
      resources: ["nodes"],
      verbs: ["patch"],
      why: "node/heartbeat.ts via handler-app.ts: patchNode = nodes.mergePatch (heartbeat, schedulable labels)",
    },
  ],
  namespaced: [
    {
      apiGroups: [""],
      resources: ["configmaps"],
      resourceNames: [CERTIFICATES.caConfigMap],
      verbs: [...INFORMER],
      why:
        "main.ts: watchConfigMapKey (libs/kube) of ConfigMap kubevirt-ca, the CA bundle virt-api's and the other " +
        "handlers' certificates are checked against (a metadata.name field selector, so resourceNames suffice)",
    },
  ],
};

/** virt-api: impersonates the caller for subresource writes; reads with its own identity (main.ts). */
const api: ComponentRules = {
  serviceAccount: "kubevirt-apiserver",
  cluster: [
    {
      apiGroups: [""],
      resources: ["users", "groups", "serviceaccounts"],
      verbs: ["impersonate"],
      why:
        "kube/rest.ts impersonationHeaders: subresource writes act as the requesting user (Impersonate-User/Group; a " +
        "service account user is checked as serviceaccounts); main.ts internalClient impersonates kubevirt-apiserver. " +
        "RBAC cannot narrow this to the callers' names, so virt-api can act as any user or group, system:masters " +
        "included: the broadest grant here (KubeVirt's virt-api writes as itself after the aggregator authorized " +
        "the subresource, and needs no impersonation)",
    },
    {
      apiGroups: ["authentication.k8s.io"],
      resources: ["*"],
      verbs: ["impersonate"],
      why:
        "kube/rest.ts impersonationHeaders: Impersonate-Extra-<key> (userextras/<key>: RBAC has no userextras/* " +
        "wildcard and the keys are the caller's) and Impersonate-Uid (uids) of the requesting user",
    },
    {
      apiGroups: [KV],
      resources: ["virtualmachineinstances"],
      verbs: ["get", "patch"],
      why:
        "webhooks/admitters.ts validateMigrationCreate: client.getVmi (own identity); " +
        "subresources/vm-lifecycle.ts: internal.patchVmi (grace period on stop, as kubevirt-apiserver); " +
        "webhooks/pod-eviction-admitter.ts: getVmi and patchVmi (status.evacuationNodeName on a launcher's eviction)",
    },
    {
      apiGroups: [""],
      resources: ["pods"],
      verbs: ["get"],
      why: "webhooks/pod-eviction-admitter.ts RestEvictionCluster.getPod (the pod an eviction names, in any namespace)",
    },
    {
      apiGroups: [KV],
      resources: ["virtualmachineinstancemigrations"],
      verbs: ["list"],
      why: "webhooks/admitters.ts validateMigrationCreate: client.listVmims (the VMI's other migrations)",
    },
    {
      apiGroups: [KV],
      resources: ["virtualmachineinstancepresets"],
      verbs: ["list"],
      why: "webhooks/admitters.ts mutateVmiWith: client.listVmiPresets (the presets a new VMI may match)",
    },
    {
      apiGroups: ["instancetype.kubevirt.io"],
      resources: [
        "virtualmachineinstancetypes",
        "virtualmachineclusterinstancetypes",
        "virtualmachinepreferences",
        "virtualmachineclusterpreferences",
      ],
      verbs: ["get"],
      why: "webhooks/instancetype-admitters.ts RestInstancetypeReader.get (expand a VM before validating it)",
    },
    {
      apiGroups: ["apps"],
      resources: ["controllerrevisions"],
      verbs: ["get"],
      why: "webhooks/instancetype-admitters.ts RestInstancetypeReader.getControllerRevision (the VM's pinned revision)",
    },
    {
      apiGroups: [""],
      resources: ["persistentvolumeclaims"],
      verbs: ["get"],
      why: "webhooks/instancetype-admitters.ts RestInstancetypeReader.getPvc (inferFromVolume reads the claim's labels)",
    },
  ],
  namespaced: [
    {
      apiGroups: [""],
      resources: ["pods"],
      verbs: ["list"],
      why: "handler/handler-client.ts PodHandlerLocator: listPods(kubevirt.io=virt-handler, spec.nodeName=<node>)",
    },
    {
      apiGroups: [KV],
      resources: ["kubevirts"],
      verbs: ["list"],
      why:
        "webhooks/pod-eviction-admitter.ts RestEvictionCluster.clusterEvictionStrategy (spec.configuration." +
        "evictionStrategy of the KubeVirt CR)",
    },
    {
      apiGroups: [""],
      resources: ["configmaps"],
      resourceNames: [CERTIFICATES.caConfigMap],
      verbs: [...INFORMER],
      why:
        "main.ts watchHandlerTls: watchConfigMapKey (libs/kube) of ConfigMap kubevirt-ca, the CA bundle " +
        "virt-handler's certificates are checked against (a metadata.name field selector, so resourceNames suffice)",
    },
  ],
};

/** The rules of every component that talks to the API server (virt-launcher's pods run as the VMI's account). */
export const RULES: Readonly<Record<Component, ComponentRules>> = {
  "virt-api": api,
  "virt-controller": controller,
  "virt-handler": handler,
};

function rulesOf(rules: readonly Rule[]): Record<string, unknown>[] {
  return rules.map((r) => ({
    apiGroups: [...r.apiGroups],
    resources: [...r.resources],
    ...(r.resourceNames ? { resourceNames: [...r.resourceNames] } : {}),
    verbs: [...r.verbs],
  }));
}

/** ServiceAccount, ClusterRole + ClusterRoleBinding and (when it has namespaced rules) Role + RoleBinding. */
export function rbacObjects(component: Component, namespace: string, version: string): KubeObject[] {
  const r = RULES[component];
  const labels = commonLabels(component, version);
  const subject = { kind: "ServiceAccount", name: r.serviceAccount, namespace };
  const out: KubeObject[] = [
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: r.serviceAccount, namespace, labels } },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: r.serviceAccount, labels },
      rules: rulesOf(r.cluster),
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: r.serviceAccount, labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: r.serviceAccount },
      subjects: [subject],
    },
  ];
  if (r.namespaced.length > 0) {
    out.push(
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        metadata: { name: r.serviceAccount, namespace, labels },
        rules: rulesOf(r.namespaced),
      },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: r.serviceAccount, namespace, labels },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: r.serviceAccount },
        subjects: [subject],
      },
    );
  }
  return out;
}

/** The `why` of each rule of a Role or ClusterRole, in rule order (the renderer writes them as comments). */
export function ruleReasons(component: Component, kind: "ClusterRole" | "Role"): string[] {
  const r = RULES[component];
  return (kind === "ClusterRole" ? r.cluster : r.namespaced).map((x) => x.why);
}
