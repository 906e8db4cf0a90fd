/**
 * VirtualMachineInstancePreset application (KubeVirt `mutators/preset.go`), done by virt-api's VMI mutating webhook
 * on create, before the VMI defaults:
 *
 *   VMI annotated virtualmachineinstancepresets.admission.kubevirt.io/exclude=true  -> untouched
 *   presets of the namespace whose selector matches the VMI's labels
 *   two matching presets that set the same section differently               -> the VMI is refused (422)
 *   each preset: sections the VMI leaves unset are copied (resources.requests, cpu, firmware, clock, features,
 *   devices.watchdog, ioThreadsPolicy); the VMI's own values win; a preset that ends up in effect annotates the
 *   VMI `virtualmachinepreset.kubevirt.io/<name>: kubevirt.io/v1`
 *
 * Only those sections: KubeVirt's presets never merge memory, disks or interfaces.
 */
import { isDeepStrictEqual } from "node:util";
import type { DomainSpec, VirtualMachineInstance, VirtualMachineInstancePreset } from "../types.ts";
import { labelSelectorOf } from "./label-selector.ts";

/** The annotation that keeps presets away from a VMI. */
export const PRESET_EXCLUDE_ANNOTATION = "virtualmachineinstancepresets.admission.kubevirt.io/exclude";
/** The prefix of the annotation naming each applied preset. */
export const PRESET_ANNOTATION_PREFIX = "virtualmachinepreset.kubevirt.io/";

/** Two matching presets disagree: KubeVirt refuses the VMI with this message. */
export class PresetConflictError extends Error {
  override readonly name = "PresetConflictError";
}

// Values in conflict messages: quantities as written, objects as JSON (KubeVirt prints Go's %v of its structs).
const show = (v: unknown): string => (typeof v === "string" ? v : JSON.stringify(v));

/** KubeVirt's `checkMergeConflicts`: the sections both specs set differently, as messages. */
function mergeConflicts(preset: DomainSpec | undefined, vmi: DomainSpec | undefined): string[] {
  const out: string[] = [];
  const p = preset ?? { devices: {} };
  const v = vmi ?? { devices: {} };
  for (const [key, value] of Object.entries(p.resources?.requests ?? {})) {
    const mine = v.resources?.requests?.[key];
    if (mine !== undefined && !isDeepStrictEqual(mine, value)) {
      out.push(`spec.resources.requests[${key}]: ${show(value)} != ${show(mine)}`);
    }
  }
  const pairs: [string, unknown, unknown][] = [
    ["spec.cpu", p.cpu, v.cpu],
    ["spec.firmware", p.firmware, v.firmware],
  ];
  for (const [field, a, b] of pairs) {
    if (a !== undefined && b !== undefined && !isDeepStrictEqual(a, b)) out.push(`${field}: ${show(a)} != ${show(b)}`);
  }
  if (p.clock && v.clock) {
    const offset = (c: typeof p.clock) => ({ utc: c.utc, timezone: c.timezone });
    if (!isDeepStrictEqual(offset(p.clock), offset(v.clock))) {
      out.push(`spec.clock.clockoffset: ${show(offset(p.clock))} != ${show(offset(v.clock))}`);
    }
    if (p.clock.timer && v.clock.timer && !isDeepStrictEqual(p.clock.timer, v.clock.timer)) {
      out.push(`spec.clock.timer: ${show(p.clock.timer)} != ${show(v.clock.timer)}`);
    }
  }
  const more: [string, unknown, unknown][] = [
    ["spec.features", p.features, v.features],
    ["spec.devices.watchdog", p.devices.watchdog, v.devices.watchdog],
    ["spec.ioThreadsPolicy", p.ioThreadsPolicy, v.ioThreadsPolicy],
  ];
  for (const [field, a, b] of more) {
    if (a !== undefined && b !== undefined && !isDeepStrictEqual(a, b)) out.push(`${field}: ${show(a)} != ${show(b)}`);
  }
  return out;
}

/** Go's `utilerrors.NewAggregate(...).Error()`: one message alone, several as `[a, b]`. */
const aggregate = (messages: string[]): string =>
  messages.length === 1 ? (messages[0] ?? "") : `[${messages.join(", ")}]`;

/** KubeVirt's `mergeDomainSpec`: copies the sections `vmi` leaves unset; true when the preset is in effect. */
function mergeDomain(preset: DomainSpec, vmi: DomainSpec): boolean {
  let applied = false;
  const requests = preset.resources?.requests;
  if (requests && Object.keys(requests).length > 0) {
    vmi.resources ??= {};
    vmi.resources.requests ??= structuredClone(requests);
    if (isDeepStrictEqual(vmi.resources.requests, requests)) applied = true;
  }
  const copy = <K extends "cpu" | "firmware" | "features" | "ioThreadsPolicy">(key: K): void => {
    const value = preset[key];
    if (value === undefined) return;
    vmi[key] ??= structuredClone(value);
    if (isDeepStrictEqual(vmi[key], value)) applied = true;
  };
  copy("cpu");
  copy("firmware");
  if (preset.clock) {
    if (!vmi.clock) {
      vmi.clock = {};
      if (preset.clock.utc) vmi.clock.utc = structuredClone(preset.clock.utc);
      if (preset.clock.timezone) vmi.clock.timezone = preset.clock.timezone;
    }
    if (isDeepStrictEqual(vmi.clock, preset.clock)) applied = true;
    if (preset.clock.timer) {
      vmi.clock.timer ??= structuredClone(preset.clock.timer);
      if (isDeepStrictEqual(vmi.clock.timer, preset.clock.timer)) applied = true;
    }
  }
  copy("features");
  if (preset.devices.watchdog) {
    vmi.devices.watchdog ??= structuredClone(preset.devices.watchdog);
    if (isDeepStrictEqual(vmi.devices.watchdog, preset.devices.watchdog)) applied = true;
  }
  copy("ioThreadsPolicy");
  return applied;
}

/**
 * Applies the matching presets of `presets` (the VMI's namespace) to `vmi` in place. Throws
 * {@link PresetConflictError} when two matching presets conflict, and an Error for a preset whose selector is
 * invalid (KubeVirt's LabelSelectorAsSelector error).
 */
export function applyPresets(vmi: VirtualMachineInstance, presets: readonly VirtualMachineInstancePreset[]): void {
  if (vmi.metadata?.annotations?.[PRESET_EXCLUDE_ANNOTATION] === "true") return;
  const labels = vmi.metadata?.labels ?? {};
  const matching = presets.filter((p) => labelSelectorOf(p.spec?.selector).matches(labels));
  if (matching.length === 0) return;
  const conflicts: string[] = [];
  matching.forEach((preset, i) => {
    for (const visited of matching.slice(0, i)) {
      const c = mergeConflicts(preset.spec?.domain, visited.spec?.domain);
      const name = (x: VirtualMachineInstancePreset) => x.metadata?.name ?? "";
      if (c.length > 0) conflicts.push(`presets '${name(preset)}' and '${name(visited)}' conflict: ${aggregate(c)}`);
    }
  });
  if (conflicts.length > 0) {
    throw new PresetConflictError(`VirtualMachinePresets cannot be applied due to conflicts: ${aggregate(conflicts)}`);
  }
  for (const preset of matching) {
    const domain = preset.spec?.domain;
    if (!domain || !mergeDomain(domain, vmi.spec.domain)) continue;
    vmi.metadata ??= {};
    vmi.metadata.annotations = {
      ...vmi.metadata.annotations,
      [`${PRESET_ANNOTATION_PREFIX}${preset.metadata?.name ?? ""}`]: "kubevirt.io/v1",
    };
  }
}
