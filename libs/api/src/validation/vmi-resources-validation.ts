/* eslint-disable @typescript-eslint/restrict-template-expressions -- FieldPath prints itself (toString) exactly as KubeVirt formats paths into its messages. */
/**
 * VMI spec rules about identity and resources (KubeVirt `vmi-create-admitter.go`): hostname/subdomain, memory and
 * CPU requests/limits, dedicated CPUs, start and eviction strategies, kernel boot. Messages are KubeVirt's.
 */
import { EVICTION_STRATEGIES } from "../constants.ts";
import { Quantity } from "../quantity.ts";
import type { ValidationCause, VirtualMachineInstanceSpec } from "../types.ts";
import { CAUSE_TYPE, cause, type FieldPath } from "./causes.ts";
import { dns1123LabelErrors, dns1123SubdomainErrors } from "./dns.ts";
import { quantityOrZero, readQuantity } from "./quantities.ts";
import type { ClusterConfig } from "./validation-config.ts";

const mustBePositive = (f: FieldPath, q: Quantity): string => `${f} '${q}': must be greater than or equal to 0.`;
const MAX_INT64 = (1n << 63n) - 1n;

/**
 * `scaled` (a Quantity's Value() or MilliValue()) as KubeVirt reads it: an int64. Past int64 Go's conversion of the
 * huge value yields MinInt64 on amd64 (1e400 -> -9223372036854775808), so KubeVirt refuses such a quantity as
 * negative; reading it the same way gives the same answer and keeps 10^400-byte guests out of the cluster.
 */
const asInt64 = (scaled: bigint): bigint => (scaled > MAX_INT64 || scaled < -MAX_INT64 - 1n ? -MAX_INT64 - 1n : scaled);

/** hostname must be a DNS label, subdomain a DNS subdomain. */
export function validateNames(field: FieldPath, spec: VirtualMachineInstanceSpec): ValidationCause[] {
  const causes: ValidationCause[] = [];
  if (spec.hostname) {
    const errs = dns1123LabelErrors(spec.hostname);
    if (errs.length > 0) {
      const f = field.child("hostname");
      causes.push(
        cause(CAUSE_TYPE.invalid, `${f} does not conform to the kubernetes DNS_LABEL rules : ${errs.join(", ")}`, f),
      );
    }
  }
  if (spec.subdomain) {
    const errs = dns1123SubdomainErrors(spec.subdomain);
    if (errs.length > 0) {
      const f = field.child("subdomain");
      causes.push(
        cause(
          CAUSE_TYPE.invalid,
          `${f} does not conform to the kubernetes DNS_SUBDOMAIN rules : ${errs.join(", ")}`,
          f,
        ),
      );
    }
  }
  return causes;
}

/** Memory requests/limits: parseable, not negative, requests >= 1M, requests <= limits, guest <= limits. */
export function validateMemory(
  field: FieldPath,
  spec: VirtualMachineInstanceSpec,
  config: ClusterConfig,
): ValidationCause[] {
  const causes: ValidationCause[] = [];
  const res = spec.domain.resources;
  const reqF = field.child("domain", "resources", "requests", "memory");
  const limF = field.child("domain", "resources", "limits", "memory");
  const req = readQuantity(res?.requests?.memory, reqF, causes) ?? Quantity.of(0);
  const lim = readQuantity(res?.limits?.memory, limF, causes) ?? Quantity.of(0);
  const reqV = asInt64(req.value());
  const limV = asInt64(lim.value());
  if (reqV < 0n) causes.push(cause(CAUSE_TYPE.invalid, mustBePositive(reqF, req), reqF));
  else if (reqV > 0n && req.cmp(Quantity.parse("1M")) < 0) {
    causes.push(cause(CAUSE_TYPE.invalid, `${reqF} '${req}': must be greater than or equal to 1M.`, reqF));
  }
  if (limV < 0n) causes.push(cause(CAUSE_TYPE.invalid, mustBePositive(limF, lim), limF));
  if (limV > 0n && reqV > limV) {
    causes.push(cause(CAUSE_TYPE.invalid, `${reqF} '${req}' is greater than ${limF} '${lim}'`, reqF));
  }
  const guestF = field.child("domain", "memory", "guest");
  const guest = readQuantity(spec.domain.memory?.guest, guestF, causes);
  const guestV = guest ? asInt64(guest.value()) : 0n;
  if (guest && guestV < 0n) causes.push(cause(CAUSE_TYPE.invalid, mustBePositive(guestF, guest), guestF));
  // With LiveUpdate KubeVirt lets guest exceed the limit (hotplug headroom); otherwise it must fit.
  if (config.vmRolloutStrategy !== "LiveUpdate" && guest && limV !== 0n && limV < guestV) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        `${guestF} '${guest}' must be equal to or less than the memory limit ${limF} '${lim}'`,
        guestF,
      ),
    );
  }
  return causes;
}

/** CPU requests/limits: parseable, not negative, request <= limit; dedicated CPUs need integral, equal values. */
export function validateCpu(field: FieldPath, spec: VirtualMachineInstanceSpec): ValidationCause[] {
  const causes: ValidationCause[] = [];
  const res = spec.domain.resources;
  const reqF = field.child("domain", "resources", "requests", "cpu");
  const limF = field.child("domain", "resources", "limits", "cpu");
  const req = readQuantity(res?.requests?.cpu, reqF, causes) ?? Quantity.of(0);
  const lim = readQuantity(res?.limits?.cpu, limF, causes) ?? Quantity.of(0);
  const reqM = asInt64(req.milliValue());
  const limM = asInt64(lim.milliValue());
  if (reqM < 0n) causes.push(cause(CAUSE_TYPE.invalid, mustBePositive(reqF, req), reqF));
  if (limM < 0n) causes.push(cause(CAUSE_TYPE.invalid, mustBePositive(limF, lim), limF));
  if (limM > 0n && reqM > limM) {
    causes.push(cause(CAUSE_TYPE.invalid, `${reqF} '${req}' is greater than ${limF} '${lim}'`, reqF));
  }
  for (const [k, name] of [
    ["cpu", "cores"],
    ["cpu", "sockets"],
    ["cpu", "threads"],
  ] as const) {
    const v = spec.domain.cpu?.[name];
    if (v !== undefined && v < 0) {
      const f = field.child("domain", k, name);
      causes.push(cause(CAUSE_TYPE.invalid, `${f} '${v}': must be greater than or equal to 0.`, f));
    }
  }
  if (spec.domain.cpu?.dedicatedCpuPlacement) causes.push(...validateDedicatedCpu(field, spec, req, lim));
  return causes;
}

function validateDedicatedCpu(
  field: FieldPath,
  spec: VirtualMachineInstanceSpec,
  req: Quantity,
  lim: Quantity,
): ValidationCause[] {
  const causes: ValidationCause[] = [];
  const res = spec.domain.resources;
  const memReq = quantityOrZero(res?.requests?.memory);
  const memLim = quantityOrZero(res?.limits?.memory);
  const guest = quantityOrZero(spec.domain.memory?.guest);
  if (memLim.isZero() && memReq.isZero() && !spec.domain.memory?.hugepages && guest.isZero()) {
    const d = field.child("domain");
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        `${d.child("resources", "requests", "memory")}, ${d.child("resources", "limits", "memory")}, ${d.child("memory", "hugepages")} or ${d.child("memory", "guest")} should be provided`,
        d.child("resources", "limits", "memory"),
      ),
    );
  }
  if (req.value() > 0n && req.value() * 1000n !== req.milliValue()) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        "provided resources CPU requests must be an interger",
        field.child("domain", "resources", "requests", "cpu"),
      ),
    );
  }
  if (lim.value() > 0n && lim.value() * 1000n !== lim.milliValue()) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        "provided resources CPU limits must be an interger",
        field.child("domain", "resources", "limits", "cpu"),
      ),
    );
  }
  if (memReq.value() > 0n && memLim.value() > 0n && memReq.value() !== memLim.value()) {
    const reqF = field.child("domain", "resources", "requests", "memory");
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        `${reqF} must be equal to ${field.child("domain", "resources", "limits", "memory")}`,
        reqF,
      ),
    );
  }
  return causes;
}

/** startStrategy is "Paused" or unset; evictionStrategy is one of the four values. */
export function validateStrategies(
  field: FieldPath,
  spec: VirtualMachineInstanceSpec,
  config: ClusterConfig,
): ValidationCause[] {
  const causes: ValidationCause[] = [];
  const start = spec.startStrategy as string | undefined;
  if (start !== undefined) {
    const f = field.child("startStrategy");
    if (start !== "Paused")
      causes.push(cause(CAUSE_TYPE.invalid, `${f} is set with an unrecognized option: ${start}`, f));
    else if (spec.livenessProbe) {
      causes.push(
        cause(
          CAUSE_TYPE.invalid,
          `either ${f} or ${field.child("livenessProbe")} should be provided.Pausing VMI with LivenessProbe is not supported`,
          f,
        ),
      );
    }
  }
  const eviction = (spec.evictionStrategy as string | undefined) ?? config.evictionStrategy;
  if (eviction !== undefined && !(EVICTION_STRATEGIES as readonly string[]).includes(eviction)) {
    const f = field.child("evictionStrategy");
    causes.push(cause(CAUSE_TYPE.invalid, `${f} is set with an unrecognized option: ${eviction}`, f));
  }
  const grace = spec.terminationGracePeriodSeconds;
  if (grace !== undefined && grace < 0) {
    const f = field.child("terminationGracePeriodSeconds");
    causes.push(cause(CAUSE_TYPE.invalid, `${f} '${grace}': must be greater than or equal to 0.`, f));
  }
  return causes;
}

/** Kernel boot: args need a kernel container, which needs an image and a kernel or initrd path. */
export function validateKernelBoot(field: FieldPath, spec: VirtualMachineInstanceSpec): ValidationCause[] {
  const kb = spec.domain.firmware?.kernelBoot;
  if (!kb) return [];
  const f = field.child("domain", "firmware", "kernelBoot");
  if (!kb.container) {
    return kb.kernelArgs
      ? [
          cause(
            CAUSE_TYPE.invalid,
            "kernel arguments cannot be provided without an external kernel",
            f.child("kernelArgs"),
          ),
        ]
      : [];
  }
  const cf = f.child("container");
  const causes: ValidationCause[] = [];
  if (!kb.container.image)
    causes.push(cause(CAUSE_TYPE.required, `${cf} must be defined with an image`, cf.child("image")));
  if (!kb.container.initrdPath && !kb.container.kernelPath) {
    causes.push(
      cause(
        CAUSE_TYPE.required,
        `${cf} must be defined with at least one of the following: kernelPath, initrdPath`,
        cf,
      ),
    );
  }
  return causes;
}

/** After defaulting, a VMI must have memory from requests, guest or hugepages (KubeVirt mandatory fields). */
export function validateMandatoryMemory(field: FieldPath, spec: VirtualMachineInstanceSpec): ValidationCause[] {
  if (quantityOrZero(spec.domain.resources?.requests?.memory).value() !== 0n) return [];
  const mem = spec.domain.memory;
  if (mem && (mem.guest !== undefined || mem.hugepages)) return [];
  const d = field.child("domain");
  return [
    cause(
      CAUSE_TYPE.required,
      `no memory requested, at least one of '${d.child("memory", "guest")}', '${d.child("memory", "hugepages", "pageSize")}' or '${d.child("resources", "requests", "memory")}' must be set`,
      "",
    ),
  ];
}
