/**
 * The `portforward` subresource of VMIs and VMs (KubeVirt's `PortForwardRequestHandler`, `validateVMIForPortForward`,
 * `FetchVirtualMachineInstanceForVM`):
 *
 *   GET .../virtualmachineinstances/NAME/portforward/PORT[/PROTOCOL]    the VMI of that name
 *   GET .../virtualmachines/NAME/portforward/PORT[/PROTOCOL]            the VMI the VM runs (409 "VMI is not started")
 *     -> fetch as the caller -> 409 when paused -> 400 without status.interfaces -> the VMI's virt-handler, whose
 *        launcher connects to the guest's port -> (500 `dialing VM: <why>`) -> WebSocket plain.kubevirt.io
 *
 * Everything is checked and the guest's port connected before the caller's WebSocket is accepted, so every refusal
 * is a Status on the upgrade request, as KubeVirt's streamer answers.
 */
import { findCondition, type VirtualMachineInstance } from "@kvt/api";
import { type ApiError, badRequest, conflict, errorMessage, internalError } from "@kvt/kube";
import type WebSocket from "ws";
import type { HandlerClient } from "../handler/handler-client.ts";
import { fetchVmi, fetchVmiForVm, type SubresourceTarget, VMI } from "./fetch-target.ts";

/** Protocols the guest's ports are forwarded with. */
export const PORT_FORWARD_PROTOCOLS = ["tcp"] as const;

/** One port-forward request. */
export interface PortForwardRequest extends SubresourceTarget {
  readonly handler: HandlerClient;
  readonly resource: "vm" | "vmi";
  /** The path's port and protocol segments, unparsed. */
  readonly port: string;
  readonly protocol?: string;
}

/** An open tunnel: the VMI and the paused WebSocket to its handler (resume once listeners are attached). */
export interface PortForwardTunnel {
  readonly vmi: VirtualMachineInstance;
  readonly port: number;
  readonly protocol: string;
  readonly upstream: WebSocket;
}

/** The port (1-65535) and protocol (default tcp) of the path; a BadRequest naming the bad segment otherwise. */
export function parsePortForwardTarget(port: string, protocol = "tcp"): { port: number; protocol: string } {
  const n = /^\d{1,5}$/.test(port) ? Number(port) : Number.NaN;
  if (!(n >= 1 && n <= 65535)) throw badRequest(`invalid port "${port}": expected 1-65535`);
  if (!(PORT_FORWARD_PROTOCOLS as readonly string[]).includes(protocol)) {
    throw badRequest(`unsupported protocol "${protocol}": expected one of tcp`);
  }
  return { port: n, protocol };
}

/** `validateVMIForPortForward`: a paused guest's ports are not forwarded. */
export function validatePortForward(vmi: VirtualMachineInstance): ApiError | undefined {
  const paused = findCondition(vmi.status?.conditions, "Paused") !== undefined;
  return paused ? conflict(VMI, vmi.metadata?.name ?? "", "VMI is paused") : undefined;
}

/** Checks the request and connects to the guest's port through its virt-handler; throws ApiError with the Status. */
export async function openPortForward(r: PortForwardRequest): Promise<PortForwardTunnel> {
  const { port, protocol } = parsePortForwardTarget(r.port, r.protocol);
  const vmi = r.resource === "vm" ? await fetchVmiForVm(r) : await fetchVmi(r);
  const refusal = validatePortForward(vmi);
  if (refusal) throw refusal;
  // KubeVirt dials the first interface's address; without one there is nothing to reach.
  if ((vmi.status?.interfaces ?? []).length === 0) throw badRequest("no network interfaces are present");
  try {
    return { vmi, port, protocol, upstream: await r.handler.portForward(vmi, port, protocol) };
  } catch (error) {
    throw internalError(`dialing VM: ${errorMessage(error)}`);
  }
}
