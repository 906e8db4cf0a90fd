/**
 * `virtctl version [-c]`: the client version, then the server's (the `version` subresource through the API
 * server), both printed as Go's `%#v` of `version.Info`. Without any kubeconfig it prints the client version and
 * says there is no server to ask, exiting 0.
 */

import { errorMessage } from "@kvt/kube";
import pkg from "../../package.json" with { type: "json" };
import { type Command, CommandError } from "../cli/command.ts";
import type { VirtClient } from "../kube/client.ts";
import { SUBRESOURCE_VERSION_PATH } from "../kube/paths.ts";

/** A `version.Info` as KubeVirt serves it. */
export interface VersionInfo {
  gitVersion?: string;
  gitCommit?: string;
  gitTreeState?: string;
  buildDate?: string;
  goVersion?: string;
  compiler?: string;
  platform?: string;
}

/** Go's `%#v` rendering of a version.Info. */
export function formatVersionInfo(v: VersionInfo): string {
  const q = (s: string | undefined): string => JSON.stringify(s ?? "");
  return `version.Info{GitVersion:${q(v.gitVersion)}, GitCommit:${q(v.gitCommit)}, GitTreeState:${q(v.gitTreeState)}, BuildDate:${q(v.buildDate)}, GoVersion:${q(v.goVersion)}, Compiler:${q(v.compiler)}, Platform:${q(v.platform)}}`;
}

/** This virtctl's own version.Info. */
export function clientVersion(): VersionInfo {
  return {
    gitVersion: `v${pkg.version}`,
    gitCommit: "",
    gitTreeState: "clean",
    buildDate: "1970-01-01T00:00:00Z",
    goVersion: "Deno" in globalThis ? "deno" : `node ${process.versions.node}`,
    compiler: "tsc",
    platform: `${process.platform}/${process.arch === "x64" ? "amd64" : process.arch}`,
  };
}

/** The `version` command. */
export const versionCommand: Command = {
  name: "version",
  use: "version",
  short: "Print the client and server version information.",
  example: "  # Print the client and server versions for the current context:\n  virtctl version",
  flags: {
    client: { type: "boolean", short: "c", help: "Client version only (no server required).", default: "false" },
  },
  args: 0,
  async run(input, ctx) {
    ctx.stdout.write(`Client Version: ${formatVersionInfo(clientVersion())}\n`);
    if (input.values.client === true) return;
    let client: VirtClient;
    try {
      client = ctx.client();
    } catch (error) {
      ctx.stderr.write(`Server Version: unavailable (${errorMessage(error)})\n`);
      return;
    }
    try {
      const info = (await client.request({ method: "GET", path: SUBRESOURCE_VERSION_PATH })) as VersionInfo;
      ctx.stdout.write(`Server Version: ${formatVersionInfo(info)}\n`);
    } catch (error) {
      throw new CommandError(`failed to get server version: ${errorMessage(error)}`, { cause: error });
    }
  },
};
