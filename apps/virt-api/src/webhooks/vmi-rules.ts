/**
 * The VMI spec checks virt-api applies to VMIs and VM templates (a subset of KubeVirt's `vmi-create-admitter.go`,
 * with its messages). Written locally because @kvt/api's validation had not landed yet; it returns causes with
 * field paths under `prefix` (`spec` for a VMI, `spec.template.spec` for a VM). Pure.
 */
import type { StatusCause } from "../kube/status.ts";
import { cause, show } from "./admission.ts";

type Obj = Record<string, unknown>;

function obj(value: unknown): Obj | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Obj) : undefined;
}

function arr(value: unknown): Obj[] {
  return Array.isArray(value) ? value.filter((v): v is Obj => obj(v) !== undefined) : [];
}

const EVICTION_STRATEGIES = ["None", "LiveMigrate", "LiveMigrateIfPossible", "External"];
const QUANTITY = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

function checkMemory(domain: Obj, prefix: string): StatusCause[] {
  const resources = obj(domain.resources);
  const requests = obj(resources?.requests);
  const limits = obj(resources?.limits);
  const memory = obj(domain.memory);
  const out: StatusCause[] = [];
  if (!requests?.memory && !limits?.memory && !memory?.guest && !obj(memory?.hugepages)?.pageSize) {
    out.push(
      cause(
        `${prefix}.domain.resources.requests.memory`,
        `${prefix}.domain.resources.requests.memory, ${prefix}.domain.resources.limits.memory, ${prefix}.domain.memory.hugepages or ${prefix}.domain.memory.guest should be provided`,
        "FieldValueRequired",
      ),
    );
  }
  for (const [where, value] of [
    ["requests.memory", requests?.memory],
    ["limits.memory", limits?.memory],
    ["requests.cpu", requests?.cpu],
    ["limits.cpu", limits?.cpu],
  ] as const) {
    if (value !== undefined && !(typeof value === "number" || (typeof value === "string" && QUANTITY.test(value)))) {
      out.push(
        cause(
          `${prefix}.domain.resources.${where}`,
          `${prefix}.domain.resources.${where} '${show(value)}' is not a valid quantity`,
        ),
      );
    } else if (typeof value === "string" && value.startsWith("-")) {
      out.push(
        cause(
          `${prefix}.domain.resources.${where}`,
          `${prefix}.domain.resources.${where} '${value}': must be greater than or equal to 0.`,
        ),
      );
    }
  }
  return out;
}

function checkDisks(spec: Obj, domain: Obj, prefix: string): StatusCause[] {
  const out: StatusCause[] = [];
  const volumes = new Set(arr(spec.volumes).map((v) => v.name));
  const seen = new Set<unknown>();
  arr(obj(domain.devices)?.disks).forEach((disk, idx) => {
    const field = `${prefix}.domain.devices.disks[${idx}]`;
    if (typeof disk.name !== "string" || disk.name === "") {
      out.push(cause(`${field}.name`, `${field}.name is required`, "FieldValueRequired"));
      return;
    }
    if (seen.has(disk.name))
      out.push(cause(`${field}.name`, `${field}.name '${disk.name}' is duplicated.`, "FieldValueDuplicate"));
    seen.add(disk.name);
    if (!volumes.has(disk.name)) out.push(cause(`${field}.name`, `${field}.Name '${disk.name}' not found.`));
    if (typeof disk.bootOrder === "number" && disk.bootOrder < 1) {
      out.push(cause(`${field}.bootOrder`, `${field} must have a boot order > 0, if supplied`));
    }
  });
  const volumeNames = new Set<unknown>();
  arr(spec.volumes).forEach((volume, idx) => {
    const field = `${prefix}.volumes[${idx}].name`;
    if (volumeNames.has(volume.name))
      out.push(cause(field, `${field} '${show(volume.name)}' is duplicated.`, "FieldValueDuplicate"));
    volumeNames.add(volume.name);
  });
  return out;
}

function checkNetworks(spec: Obj, domain: Obj, prefix: string): StatusCause[] {
  const out: StatusCause[] = [];
  const networks = new Set(arr(spec.networks).map((n) => n.name));
  arr(obj(domain.devices)?.interfaces).forEach((iface, idx) => {
    const field = `${prefix}.domain.devices.interfaces[${idx}].name`;
    if (!networks.has(iface.name)) out.push(cause(field, `${field} '${show(iface.name)}' not found.`));
  });
  return out;
}

/** Checks a VMI spec; `prefix` is the field path of the spec (`spec` or `spec.template.spec`). */
export function validateVmiSpec(specValue: unknown, prefix: string): StatusCause[] {
  const spec = obj(specValue);
  if (!spec) return [cause(prefix, `${prefix} is required`, "FieldValueRequired")];
  const domain = obj(spec.domain);
  if (!domain) return [cause(`${prefix}.domain`, `${prefix}.domain is required`, "FieldValueRequired")];
  const out = [
    ...checkMemory(domain, prefix),
    ...checkDisks(spec, domain, prefix),
    ...checkNetworks(spec, domain, prefix),
  ];
  if (spec.evictionStrategy !== undefined && !EVICTION_STRATEGIES.includes(show(spec.evictionStrategy))) {
    out.push(
      cause(
        `${prefix}.evictionStrategy`,
        `${prefix}.evictionStrategy is set with an unrecognized option: ${show(spec.evictionStrategy)}`,
      ),
    );
  }
  if (spec.startStrategy !== undefined && spec.startStrategy !== "Paused") {
    out.push(
      cause(
        `${prefix}.startStrategy`,
        `${prefix}.startStrategy is set with an unrecognized option: ${show(spec.startStrategy)}`,
      ),
    );
  }
  if (spec.hostname !== undefined && !(typeof spec.hostname === "string" && DNS_LABEL.test(spec.hostname))) {
    out.push(
      cause(
        `${prefix}.hostname`,
        `${prefix}.hostname does not conform to the kubernetes DNS_LABEL rules : ${show(spec.hostname)}`,
      ),
    );
  }
  const grace = spec.terminationGracePeriodSeconds;
  if (grace !== undefined && !(typeof grace === "number" && Number.isInteger(grace) && grace >= 0)) {
    out.push(
      cause(
        `${prefix}.terminationGracePeriodSeconds`,
        `${prefix}.terminationGracePeriodSeconds must be a non-negative integer`,
      ),
    );
  }
  return out;
}
