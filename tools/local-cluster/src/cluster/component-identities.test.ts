import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { parseTokenFile } from "../apiserver/auth/token-file.ts";
import {
  componentIdentities,
  componentKubeconfig,
  ensureComponentTokens,
  writeComponentKubeconfigs,
} from "./component-identities.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("component identities", () => {
  it("names the scheduler system:kube-scheduler, the proxy system:kube-proxy and each kubelet system:node:<name>", () => {
    expect(componentIdentities(["node01", "node02"])).toEqual([
      { file: "scheduler", username: "system:kube-scheduler", groups: [] },
      { file: "kube-proxy", username: "system:kube-proxy", groups: [] },
      { file: "node-node01", username: "system:node:node01", groups: ["system:nodes"] },
      { file: "node-node02", username: "system:node:node02", groups: ["system:nodes"] },
    ]);
  });

  it("keeps tokens across restarts, adds a new node's, and writes 0600 files", () => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-ids-"));
    dirs.push(dir);
    const file = join(dir, "token-auth.csv");
    const first = ensureComponentTokens(file, componentIdentities(["node01"]));
    const second = ensureComponentTokens(file, componentIdentities(["node01", "node02"]));
    expect(second.slice(0, 3)).toEqual(first);
    expect(second[3].username).toBe("system:node:node02");
    expect(new Set(second.map((t) => t.token)).size).toBe(4);
    expect(parseTokenFile(readFileSync(file, "utf8"))).toEqual(second);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const kubeconfig = join(dir, "kubeconfig");
    const ids = componentIdentities(["node01", "node02"]);
    writeComponentKubeconfigs(kubeconfig, "https://127.0.0.1:6443", "CA", ids, second);
    const kc = parse(readFileSync(componentKubeconfig(kubeconfig, "node-node02"), "utf8")) as {
      users: { user: { token: string } }[];
    };
    expect(kc.users[0].user.token).toBe(second[3].token);
    expect(statSync(componentKubeconfig(kubeconfig, "scheduler")).mode & 0o777).toBe(0o600);
  });
});
