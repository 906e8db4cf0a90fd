/** Host KVM facts. */
import { existsSync } from "node:fs";
import { binding } from "./native.ts";

/** KVM_GET_API_VERSION of /dev/kvm (12 on every supported kernel). Throws VmmError when /dev/kvm cannot be opened. */
export function kvmApiVersion(): number {
  return binding().kvmApiVersion();
}

/** True when /dev/kvm exists (tests use it to pick their lane). */
export function hasKvm(): boolean {
  return existsSync("/dev/kvm");
}
