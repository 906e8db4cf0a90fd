/**
 * `virtctl console VMI [--timeout MIN]`: attach the terminal to the VMI's serial console over the `console`
 * subresource (WebSocket, subprotocol `plain.kubevirt.io`, raw bytes both ways).
 *
 *   connect (retry each second while the API answers 400, e.g. VMI not running yet, until --timeout minutes)
 *     -> stdin raw (when a TTY) -> stdin bytes ==> socket ; socket bytes ==> stdout
 *     -> ends on Ctrl+] (0x1d), EOF of a terminal, SIGINT/SIGTERM, or the socket closing (abnormal close: exit 1
 *        with a hint). Piped stdin running out only stops sending, so `virtctl console vm </dev/null | grep -m1 x`
 *        works (KubeVirt's virtctl returns at once on any stdin EOF).
 */

import { ApiError, errorMessage } from "@kvt/kube";
import type WebSocket from "ws";
import { type Command, type CommandContext, CommandError, intFlag } from "../cli/command.ts";
import type { VirtClient } from "../kube/client.ts";
import { vmiSubresource } from "../kube/paths.ts";

/** The escape byte: Ctrl+] (also what Ctrl+5 sends). */
export const ESCAPE = 0x1d;
const SUBPROTOCOL = "plain.kubevirt.io";
const DISCONNECTED =
  "\nYou were disconnected from the console. This could be caused by one of the following:" +
  "\n - the target VM was powered off" +
  "\n - another user connected to the console of the target VM" +
  "\n - network issues\n";

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}

/** Connects, retrying on 400 like KubeVirt's `SerialConsole` with a ConnectionTimeout. */
export async function connectConsole(
  client: VirtClient,
  name: string,
  timeoutMs: number,
  signal: AbortSignal,
  retryDelayMs = 1000,
): Promise<WebSocket | undefined> {
  const deadline = Date.now() + timeoutMs;
  const path = vmiSubresource(client.namespace, name, "console");
  for (;;) {
    if (signal.aborted) return undefined;
    try {
      return await client.websocket(path, [SUBPROTOCOL]);
    } catch (error) {
      if (!(error instanceof ApiError) || error.code !== 400) {
        const code = error instanceof ApiError ? error.code : 0;
        const message = code ? `Can't connect to websocket (${code}): ${errorMessage(error)}` : errorMessage(error);
        throw new CommandError(message, { cause: error });
      }
      if (Date.now() + retryDelayMs > deadline) {
        throw new CommandError("Timeout trying to connect to the virtual machine instance");
      }
      await sleep(retryDelayMs, signal);
    }
  }
}

/** Pumps bytes between the terminal and `ws` until one side ends. Resolves to the outcome. */
export function attach(
  ws: WebSocket,
  ctx: CommandContext,
): Promise<"escape" | "eof" | "closed" | "abnormal" | "signal"> {
  const { stdin } = ctx;
  const raw = stdin.isTTY === true && typeof stdin.setRawMode === "function";
  if (raw) stdin.setRawMode?.(true);
  return new Promise((resolve) => {
    let done = false;
    const finish = (outcome: "escape" | "eof" | "closed" | "abnormal" | "signal"): void => {
      if (done) return;
      done = true;
      stdin.off("data", onData);
      stdin.off("end", onEnd);
      if (raw) stdin.setRawMode?.(false);
      stdin.pause();
      if (outcome !== "closed" && outcome !== "abnormal") ws.close();
      resolve(outcome);
    };
    const onData = (chunk: Buffer | string): void => {
      const bytes = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      const at = bytes.indexOf(ESCAPE);
      if (at >= 0) {
        if (at > 0) ws.send(bytes.subarray(0, at), { binary: true });
        finish("escape");
        return;
      }
      ws.send(bytes, { binary: true });
    };
    // A terminal's EOF ends the session; piped input running out only stops sending (the guest's output keeps
    // flowing until the socket closes, SIGINT/SIGTERM, or the reader of our stdout goes away).
    const onEnd = (): void => {
      if (raw) finish("eof");
      else {
        stdin.off("data", onData);
        stdin.off("end", onEnd);
      }
    };
    ws.on("message", (data: Buffer) => ctx.stdout.write(data));
    ws.on("close", (code: number) => finish(code === 1006 ? "abnormal" : "closed"));
    ws.on("error", () => finish("abnormal"));
    ctx.signal.addEventListener("abort", () => finish("signal"), { once: true });
    stdin.on("data", onData);
    stdin.on("end", onEnd);
    stdin.resume();
    ws.resume();
  });
}

/** The `console` command. */
export const consoleCommand: Command = {
  name: "console",
  use: "console (VMI)",
  short: "Connect to a console of a virtual machine instance.",
  example:
    "  # Connect to the console on VirtualMachineInstance 'myvmi':\n  virtctl console myvmi\n  # Configure one minute timeout (default 5 minutes)\n  virtctl console --timeout=1 myvmi",
  flags: {
    timeout: {
      type: "string",
      help: "The number of minutes to wait for the virtual machine instance to be ready.",
      default: "5",
    },
  },
  args: 1,
  async run(input, ctx) {
    const [name = ""] = input.args;
    const minutes = intFlag(input, "timeout", 5);
    let client: VirtClient;
    try {
      client = ctx.client();
    } catch (error) {
      throw new CommandError(`cannot obtain KubeVirt client: ${errorMessage(error)}`, { cause: error });
    }
    const ws = await connectConsole(client, name, minutes * 60_000, ctx.signal);
    if (!ws) {
      ctx.stdout.write("\n");
      return;
    }
    ctx.stderr.write(`Successfully connected to ${name} console. Press Ctrl+] or Ctrl+5 to exit console.\n`);
    const outcome = await attach(ws, ctx);
    if (outcome === "abnormal") {
      ctx.stderr.write(DISCONNECTED);
      throw new CommandError("websocket: close 1006 (abnormal closure): unexpected EOF");
    }
  },
};
