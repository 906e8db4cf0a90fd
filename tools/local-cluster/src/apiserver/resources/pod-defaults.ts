/**
 * A Pod's defaults and QoS class as kube-apiserver sets them (pkg/apis/core/v1/defaults.go SetDefaults_Pod,
 * SetDefaults_PodSpec, SetDefaults_Container, the volume sources', probes' and field selectors'; QoS from
 * pkg/apis/core/helper/qos ComputePodQOS), applied to every write of a Pod before validation:
 *
 * - containers (and init and ephemeral ones): imagePullPolicy (`Always` for a `:latest` or untagged image, else
 *   `IfNotPresent`), terminationMessagePath `/dev/termination-log`, terminationMessagePolicy `File`, ports'
 *   protocol `TCP`, probes' timeoutSeconds 1 / periodSeconds 10 / successThreshold 1 / failureThreshold 3 and
 *   httpGet path `/` and scheme `HTTP`, env fieldRefs' apiVersion `v1`; requests copied from limits where a
 *   container sets a limit without its request (containers and init containers only);
 * - the pod spec: enableServiceLinks true, securityContext `{}`, serviceAccount mirrored from serviceAccountName;
 * - volumes: a volume without a source is an emptyDir; secret, configMap, downwardAPI and projected defaultMode 420
 *   (0644); a projected serviceAccountToken's expirationSeconds 3600; hostPath type `""`; downward API fieldRefs'
 *   apiVersion `v1`;
 * - status.qosClass: Guaranteed when every container limits cpu and memory and every cpu/memory request equals the
 *   limit, BestEffort when none requests or limits either, Burstable otherwise (pod-level resources decide when
 *   set).
 *
 * Found by the scale bench, comparing a virt-launcher pod stored by kube-apiserver v1.37.2 with this server's:
 * every launcher pod (it requests cpu and memory) was BestEffort here and Burstable there.
 */
import { Quantity, tryParseQuantity } from "@kvt/api";
import { isObject, type KubeObject } from "../types.ts";

type O = Record<string, unknown>;

const objects = (v: unknown): O[] => (Array.isArray(v) ? v.filter(isObject) : []);

/** The tag of an image reference (`latest` when it has neither tag nor digest), as kube's parsers.ParseImageName. */
export function imageTag(image: string): string {
  if (image === "") return "";
  const digest = image.indexOf("@");
  const name = digest >= 0 ? image.slice(0, digest) : image;
  const lastSlash = name.lastIndexOf("/");
  const colon = name.lastIndexOf(":");
  if (colon > lastSlash) return name.slice(colon + 1);
  return digest >= 0 ? "" : "latest";
}

function defaultFieldRef(holder: O): void {
  if (isObject(holder.fieldRef) && !holder.fieldRef.apiVersion) holder.fieldRef.apiVersion = "v1";
}

function defaultProbe(probe: unknown): void {
  if (!isObject(probe)) return;
  probe.timeoutSeconds ||= 1;
  probe.periodSeconds ||= 10;
  probe.successThreshold ||= 1;
  probe.failureThreshold ||= 3;
  if (isObject(probe.httpGet)) {
    probe.httpGet.path ||= "/";
    probe.httpGet.scheme ||= "HTTP";
  }
}

function defaultContainer(c: O, requestsFromLimits: boolean): void {
  const image = typeof c.image === "string" ? c.image : "";
  if (!c.imagePullPolicy) c.imagePullPolicy = imageTag(image) === "latest" ? "Always" : "IfNotPresent";
  c.terminationMessagePath ||= "/dev/termination-log";
  c.resources ??= {}; // a struct, not a pointer, in Go: always serialized
  c.terminationMessagePolicy ||= "File";
  for (const port of objects(c.ports)) port.protocol ||= "TCP";
  for (const probe of ["livenessProbe", "readinessProbe", "startupProbe"]) defaultProbe(c[probe]);
  for (const env of objects(c.env)) if (isObject(env.valueFrom)) defaultFieldRef(env.valueFrom);
  const resources = isObject(c.resources) ? c.resources : undefined;
  if (requestsFromLimits && resources && isObject(resources.limits)) {
    const requests = isObject(resources.requests) ? resources.requests : {};
    for (const [name, limit] of Object.entries(resources.limits)) if (!(name in requests)) requests[name] = limit;
    resources.requests = requests;
  }
}

function defaultVolume(v: O): void {
  const sources = Object.keys(v).filter((k) => k !== "name" && v[k] !== null && v[k] !== undefined);
  if (sources.length === 0) v.emptyDir = {};
  for (const kind of ["secret", "configMap", "downwardAPI", "projected"]) {
    const source = v[kind];
    if (isObject(source)) source.defaultMode ??= 420;
  }
  if (isObject(v.hostPath)) v.hostPath.type ??= "";
  if (isObject(v.downwardAPI)) for (const item of objects(v.downwardAPI.items)) defaultFieldRef(item);
  if (isObject(v.projected)) {
    for (const source of objects(v.projected.sources)) {
      if (isObject(source.serviceAccountToken)) source.serviceAccountToken.expirationSeconds ??= 3600;
      if (isObject(source.downwardAPI)) for (const item of objects(source.downwardAPI.items)) defaultFieldRef(item);
    }
  }
}

/** Applies kube's Pod defaults to `pod` in place (see the module comment). */
export function defaultPod(pod: KubeObject): void {
  if (!isObject(pod.spec)) return;
  const spec = pod.spec;
  for (const c of objects(spec.containers)) defaultContainer(c, true);
  for (const c of objects(spec.initContainers)) defaultContainer(c, true);
  for (const c of objects(spec.ephemeralContainers)) defaultContainer(c, false);
  for (const v of objects(spec.volumes)) defaultVolume(v);
  spec.enableServiceLinks ??= true;
  spec.securityContext ??= {};
  if (!spec.serviceAccountName && spec.serviceAccount) spec.serviceAccountName = spec.serviceAccount;
  if (spec.serviceAccountName) spec.serviceAccount = spec.serviceAccountName;
  spec.restartPolicy ||= "Always";
  spec.terminationGracePeriodSeconds ??= 30;
  spec.dnsPolicy ||= "ClusterFirst";
  spec.schedulerName ||= "default-scheduler";
}

const QOS_RESOURCES = ["cpu", "memory"];

/** Sums the positive cpu and memory quantities of `list` into `into` (millis). */
function addQos(into: Map<string, bigint>, list: unknown): Set<string> {
  const found = new Set<string>();
  if (!isObject(list)) return found;
  for (const [name, raw] of Object.entries(list)) {
    if (!QOS_RESOURCES.includes(name)) continue;
    const q = tryParseQuantity(raw);
    if (!q || q.cmp(Quantity.of(0)) <= 0) continue;
    found.add(name);
    into.set(name, (into.get(name) ?? 0n) + q.milliValue());
  }
  return found;
}

/** The pod's QoS class (`Guaranteed`, `Burstable` or `BestEffort`), from its defaulted spec. */
export function podQosClass(pod: KubeObject): "Guaranteed" | "Burstable" | "BestEffort" {
  const spec = isObject(pod.spec) ? pod.spec : {};
  const requests = new Map<string, bigint>();
  const limits = new Map<string, bigint>();
  let guaranteed = true;
  const podLevel = isObject(spec.resources) ? spec.resources : undefined;
  if (podLevel) {
    addQos(requests, podLevel.requests);
    const found = addQos(limits, podLevel.limits);
    if (!QOS_RESOURCES.every((r) => found.has(r))) guaranteed = false;
  } else {
    for (const c of [...objects(spec.containers), ...objects(spec.initContainers)]) {
      const resources = isObject(c.resources) ? c.resources : {};
      addQos(requests, resources.requests);
      const found = addQos(limits, resources.limits);
      if (!QOS_RESOURCES.every((r) => found.has(r))) guaranteed = false;
    }
  }
  if (requests.size === 0 && limits.size === 0) return "BestEffort";
  if (guaranteed) for (const [name, req] of requests) if (limits.get(name) !== req) guaranteed = false;
  return guaranteed && requests.size === limits.size ? "Guaranteed" : "Burstable";
}
