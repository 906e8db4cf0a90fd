import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runVirtctl } from "../cli/cli.ts";
import type { VirtClient } from "../kube/client.ts";
import { COMMANDS } from "./index.ts";
import { parseScpLocations } from "./scp.ts";
import { localClientArgs, parseSshTarget, proxyCommandOption, sshHost } from "./ssh.ts";

const SELF = ["/usr/bin/node", "/opt/virtctl/main.ts"];

describe("ssh targets and the wrapped client's arguments", () => {
  it.each([
    ["jdoe@vmi/testvmi", { kind: "vmi", name: "testvmi", username: "jdoe" }],
    ["vm/testvm/mynamespace", { kind: "vm", name: "testvm", namespace: "mynamespace" }],
  ])("parses %s", (arg, expected) => {
    expect(parseSshTarget(arg)).toEqual(expected);
  });

  it.each([
    ["@vmi/x", "expected username before '@'"],
    ["jdoe@", "expected target after '@'"],
    ["jdoe@testvmi", "target must contain type and name separated by '/'"],
  ])("%s fails: %s", (arg, message) => {
    expect(() => parseSshTarget(arg)).toThrow(message);
  });

  it("builds KubeVirt's ProxyCommand with this virtctl and its connection flags", () => {
    const target = { kind: "vmi" as const, name: "testvmi" };
    expect(proxyCommandOption(target, "ns1", 22, {}, SELF)).toBe(
      "ProxyCommand=/usr/bin/node /opt/virtctl/main.ts port-forward --stdio=true vmi/testvmi/ns1 22",
    );
    expect(
      proxyCommandOption(target, "ns1", 2222, { kubeconfig: "/tmp/my kube%cfg", context: "c1", namespace: "x" }, SELF),
    ).toBe(
      "ProxyCommand=/usr/bin/node /opt/virtctl/main.ts '--kubeconfig=/tmp/my kube%%cfg' --context=c1 port-forward --stdio=true vmi/testvmi/ns1 2222",
    );
  });

  it("puts the proxy first, then the extra options, known hosts and key, then the client's arguments", () => {
    const options = {
      port: 22,
      username: "root",
      identityFile: "/k/id",
      knownHostsFile: "/k/known",
      localSshOpts: ["-o StrictHostKeyChecking=no"],
    };
    expect(localClientArgs("ProxyCommand=x", options, ["root@vmi.a.b", "echo hi"])).toEqual([
      "-o",
      "ProxyCommand=x",
      "-o StrictHostKeyChecking=no",
      "-o",
      "UserKnownHostsFile=/k/known",
      "-i",
      "/k/id",
      "root@vmi.a.b",
      "echo hi",
    ]);
    expect(sshHost({ kind: "vm", name: "a" }, "b", "")).toBe("vm.a.b");
  });

  it.each([
    [
      "f.bin",
      "jdoe@vmi/v:f.bin",
      { local: "f.bin", toRemote: true, remote: { kind: "vmi", name: "v", path: "f.bin" } },
    ],
    ["vm/v/ns:/etc/hosts", "./h", { local: "./h", toRemote: false, remote: { kind: "vm", namespace: "ns" } }],
  ])("scp %s %s", (source, destination, expected) => {
    expect(parseScpLocations(source, destination)).toMatchObject(expected);
  });

  it.each([
    ["vmi/a:x", "vmi/b:y", "copying from a remote location to another remote location is not supported"],
    ["x", "y", "none of the two provided locations seems to be a remote location"],
  ])("scp %s %s fails", (source, destination, message) => {
    expect(() => parseScpLocations(source, destination)).toThrow(message);
  });
});

describe("virtctl ssh and scp run the local client", () => {
  let dir: string;
  const saved = { PATH: process.env.PATH, USER: process.env.USER };

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "virtctl-ssh-"));
    // Stand-ins for OpenSSH's ssh and scp: record their arguments, exit with FAKE_EXIT.
    for (const name of ["ssh", "scp"]) {
      writeFileSync(
        join(dir, name),
        `#!/bin/sh\nprintf '%s\\n' "$@" > "${dir}/${name}.args"\nexit "\${FAKE_EXIT:-0}"\n`,
      );
      chmodSync(join(dir, name), 0o755);
    }
  });
  afterAll(() => {
    process.env.PATH = saved.PATH;
    process.env.USER = saved.USER;
    delete process.env.FAKE_EXIT;
    rmSync(dir, { recursive: true, force: true });
  });

  async function run(argv: string[]): Promise<{ code: number; err: string }> {
    const err = new PassThrough();
    let e = "";
    err.on("data", (c: Buffer) => (e += c.toString()));
    const client = { namespace: "default" } as VirtClient;
    const code = await runVirtctl(argv, COMMANDS, {
      stdin: new PassThrough(),
      stdout: new PassThrough(),
      stderr: err,
      env: {},
      signal: new AbortController().signal,
      makeClient: () => client,
    });
    return { code, err: e };
  }

  it("ssh: user@vmi/name with -i, -c and repeated --local-ssh-opts", async () => {
    process.env.PATH = `${dir}:${saved.PATH}`;
    const r = await run([
      "ssh",
      "-i",
      "/keys/id",
      "-c",
      "echo hi",
      "--local-ssh-opts=-o StrictHostKeyChecking=no",
      "-t",
      "-oUserKnownHostsFile=/dev/null",
      "root@vmi/vm1",
    ]);
    expect(r).toEqual({ code: 0, err: "" });
    const args = readFileSync(join(dir, "ssh.args"), "utf8").split("\n").slice(0, -1);
    expect(args[0]).toBe("-o");
    expect(args[1]).toMatch(/^ProxyCommand=\S+ \S+ port-forward --stdio=true vmi\/vm1\/default 22$/);
    expect(args.slice(2)).toEqual([
      "-o StrictHostKeyChecking=no",
      "-oUserKnownHostsFile=/dev/null",
      "-i",
      "/keys/id",
      "root@vmi.vm1.default",
      "echo hi",
    ]);
  });

  it("ssh: the user defaults to -l, then $USER; the port to -p", async () => {
    process.env.PATH = `${dir}:${saved.PATH}`;
    process.env.USER = "alice";
    expect((await run(["ssh", "vm/vm2/ns2"])).code).toBe(0);
    expect(readFileSync(join(dir, "ssh.args"), "utf8")).toContain("alice@vm.vm2.ns2");
    expect((await run(["ssh", "-l", "bob", "-p", "2222", "vm/vm2/ns2"])).code).toBe(0);
    const args = readFileSync(join(dir, "ssh.args"), "utf8");
    expect(args).toContain("bob@vm.vm2.ns2");
    expect(args).toContain("vm/vm2/ns2 2222");
  });

  it("ssh's exit status becomes virtctl's, with nothing added on stderr", async () => {
    process.env.PATH = `${dir}:${saved.PATH}`;
    process.env.FAKE_EXIT = "3";
    try {
      expect(await run(["ssh", "root@vmi/vm1", "-c", "false"])).toEqual({ code: 3, err: "" });
    } finally {
      delete process.env.FAKE_EXIT;
    }
  });

  it("scp: -r and --preserve before the paths, the remote as user@kind.name.namespace:path", async () => {
    process.env.PATH = `${dir}:${saved.PATH}`;
    expect((await run(["scp", "-r", "--preserve", "./dir", "root@vmi/vm1:/tmp/dir"])).code).toBe(0);
    const args = readFileSync(join(dir, "scp.args"), "utf8").split("\n").slice(0, -1);
    expect(args.slice(2)).toEqual(["-r", "-p", "./dir", "root@vmi.vm1.default:/tmp/dir"]);
  });

  it("without ssh on PATH it fails saying which package provides it", async () => {
    process.env.PATH = dir.replace(/virtctl-ssh-.*/, "nonexistent-dir");
    const r = await run(["ssh", "root@vmi/vm1"]);
    expect(r.code).toBe(1);
    expect(r.err).toContain("ssh was not found on PATH");
    expect(r.err).toContain("apt-get install openssh-client");
  });
});
