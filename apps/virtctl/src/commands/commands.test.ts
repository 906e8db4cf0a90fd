import { PassThrough } from "node:stream";
import { type RestRequest, statusError } from "@kvt/kube";
import { describe, expect, it } from "vitest";
import { runVirtctl } from "../cli/cli.ts";
import type { VirtClient } from "../kube/client.ts";
import { vmiIdLabelValue } from "./expose.ts";
import { COMMANDS } from "./index.ts";

/** A fake API client: records requests and answers from a table keyed `METHOD path`. */
class FakeClient implements VirtClient {
  readonly namespace: string;
  readonly requests: RestRequest[] = [];
  readonly answers = new Map<string, unknown>();
  constructor(namespace = "default") {
    this.namespace = namespace;
  }
  request(req: RestRequest): Promise<unknown> {
    this.requests.push(req);
    const answer = this.answers.get(`${req.method} ${req.path}`);
    if (answer instanceof Error) return Promise.reject(answer);
    return Promise.resolve(answer);
  }
  websocket(): Promise<never> {
    return Promise.reject(statusError(404, "NotFound", "no console in this fake"));
  }
}

async function run(
  argv: string[],
  client = new FakeClient(),
): Promise<{ code: number; out: string; err: string; client: FakeClient }> {
  const out = new PassThrough();
  const err = new PassThrough();
  let o = "";
  let e = "";
  out.on("data", (c: Buffer) => (o += c.toString()));
  err.on("data", (c: Buffer) => (e += c.toString()));
  const code = await runVirtctl(argv, COMMANDS, {
    stdin: new PassThrough(),
    stdout: out,
    stderr: err,
    env: {},
    signal: new AbortController().signal,
    makeClient: (flags) => {
      if (flags.namespace) (client as { namespace: string }).namespace = flags.namespace;
      return client;
    },
  });
  return { code, out: o, err: e, client };
}

const SUB = "/apis/subresources.kubevirt.io/v1/namespaces/default";
const conflict = (msg: string) => statusError(409, "Conflict", msg);

describe("VM lifecycle commands", () => {
  it.each([
    [["start", "vm1"], "PUT", `${SUB}/virtualmachines/vm1/start`, { paused: false }, "VM vm1 was scheduled to start\n"],
    [
      ["start", "vm1", "--paused"],
      "PUT",
      `${SUB}/virtualmachines/vm1/start`,
      { paused: true },
      "VM vm1 was scheduled to start\n",
    ],
    [
      ["start", "vm1", "--dry-run"],
      "PUT",
      `${SUB}/virtualmachines/vm1/start`,
      { paused: false, dryRun: ["All"] },
      "Dry Run execution\nVM vm1 was scheduled to start\n",
    ],
    [["stop", "vm1"], "PUT", `${SUB}/virtualmachines/vm1/stop`, {}, "VM vm1 was scheduled to stop\n"],
    [
      ["stop", "vm1", "--grace-period", "0", "--force"],
      "PUT",
      `${SUB}/virtualmachines/vm1/stop`,
      { gracePeriod: 0 },
      "VM vm1 was scheduled to stop\n",
    ],
    [["restart", "vm1"], "PUT", `${SUB}/virtualmachines/vm1/restart`, {}, "VM vm1 was scheduled to restart\n"],
    [
      ["restart", "vm1", "--force", "--grace-period=0"],
      "PUT",
      `${SUB}/virtualmachines/vm1/restart`,
      { gracePeriodSeconds: 0 },
      "VM vm1 was scheduled to restart\n",
    ],
    [["migrate", "vm1"], "PUT", `${SUB}/virtualmachines/vm1/migrate`, {}, "VM vm1 was scheduled to migrate\n"],
    [
      ["migrate", "vm1", "--addedNodeSelector", "zone=b,disk=ssd"],
      "PUT",
      `${SUB}/virtualmachines/vm1/migrate`,
      { addedNodeSelector: { zone: "b", disk: "ssd" } },
      "VM vm1 was scheduled to migrate\n",
    ],
    [
      ["soft-reboot", "vm1"],
      "PUT",
      `${SUB}/virtualmachineinstances/vm1/softreboot`,
      undefined,
      "VMI vm1 was scheduled to soft-reboot\n",
    ],
    [
      ["pause", "vmi", "vm1"],
      "PUT",
      `${SUB}/virtualmachineinstances/vm1/pause`,
      {},
      "VMI vm1 was scheduled to pause\n",
    ],
    [
      ["unpause", "VMI", "vm1", "--dry-run"],
      "PUT",
      `${SUB}/virtualmachineinstances/vm1/unpause`,
      { dryRun: ["All"] },
      "Dry Run execution\nVMI vm1 was scheduled to unpause\n",
    ],
  ])("virtctl %j sends %s %s %j", async (argv, method, path, body, stdout) => {
    const { code, out, client } = await run(argv);
    expect(code).toBe(0);
    expect(out).toBe(stdout);
    expect(client.requests).toEqual([{ method, path, ...(body !== undefined ? { body } : {}) }]);
  });

  it("-n selects the namespace", async () => {
    const { client } = await run(["start", "vm1", "-n", "prod"]);
    expect(client.requests[0]?.path).toBe(
      "/apis/subresources.kubevirt.io/v1/namespaces/prod/virtualmachines/vm1/start",
    );
  });

  it.each([
    [["start", "vm-cirros"], "start", "Error starting VirtualMachine "],
    [["stop", "vm-cirros"], "stop", "error stopping VirtualMachine "],
    [["stop", "vm-cirros", "--force", "--grace-period=0"], "stop", "error force stopping VirtualMachine: "],
    [["restart", "vm-cirros"], "restart", "error restarting VirtualMachine: "],
    [["migrate", "vm-cirros"], "migrate", "Error migrating VirtualMachine "],
  ])("virtctl %j prints KubeVirt's error and exits 1", async (argv, action, prefix) => {
    const client = new FakeClient();
    const message = `Operation cannot be fulfilled on virtualmachine.kubevirt.io "vm-cirros": VM is already running`;
    client.answers.set(`PUT ${SUB}/virtualmachines/vm-cirros/${action}`, conflict(message));
    const { code, err } = await run(argv, client);
    expect(code).toBe(1);
    expect(err).toBe(`${prefix}${message}\n`);
  });

  it.each([
    [["stop", "vm1", "--force"]],
    [["stop", "vm1", "--grace-period", "0"]],
    [["restart", "vm1", "--grace-period=0"]],
  ])("virtctl %j needs both --force and --grace-period", async (argv) => {
    const { code, err, client } = await run(argv);
    expect(code).toBe(1);
    expect(err).toBe("Must both use --force=true and set --grace-period.\n");
    expect(client.requests).toEqual([]);
  });

  it.each([
    [["start", "vm", "vm-cirros"], "start", { paused: false }],
    [["start", "VirtualMachine", "vm-cirros", "--paused"], "start", { paused: true }],
    [["stop", "vms", "vm-cirros"], "stop", {}],
    [["restart", "virtualmachines", "vm-cirros", "--force", "--grace-period=0"], "restart", { gracePeriodSeconds: 0 }],
  ])("virtctl %j (the user guide's 'start vm NAME' form) acts on the VM named last", async (argv, action, body) => {
    const { code, out, client } = await run(argv);
    expect(code).toBe(0);
    expect(out).toBe(`VM vm-cirros was scheduled to ${action}\n`);
    expect(client.requests).toEqual([{ method: "PUT", path: `${SUB}/virtualmachines/vm-cirros/${action}`, body }]);
  });

  it.each([
    [["start", "vmi", "vm-cirros"], "vmi"],
    [["stop", "pod", "vm-cirros"], "pod"],
  ])("virtctl %j: two arguments need the vm resource type first", async (argv, type) => {
    const { code, err, client } = await run(argv);
    expect(code).toBe(1);
    expect(err).toBe(`Error: accepts 1 arg(s), received 2\nRun 'virtctl ${argv[0]} --help' for usage.\n`);
    expect(client.requests).toEqual([]);
    expect(type).not.toBe("vm");
  });

  it("three arguments are refused before any request", async () => {
    const { code, err, client } = await run(["restart", "vm", "a", "b"]);
    expect(code).toBe(1);
    expect(err).toBe("Error: accepts 1 arg(s), received 3\nRun 'virtctl restart --help' for usage.\n");
    expect(client.requests).toEqual([]);
  });

  it("--dry-run prints KubeVirt's line before the flag check fails", async () => {
    const { code, out, err } = await run(["stop", "vm1", "--dry-run", "--force"]);
    expect(code).toBe(1);
    expect(out).toBe("Dry Run execution\n");
    expect(err).toBe("Must both use --force=true and set --grace-period.\n");
  });
});

describe("pause/unpause vm", () => {
  it("pause vm checks the VM, then pauses its VMI", async () => {
    const client = new FakeClient();
    client.answers.set("GET /apis/kubevirt.io/v1/namespaces/default/virtualmachines/vm1", {
      spec: { runStrategy: "Always" },
    });
    const { code, client: c } = await run(["pause", "vm", "vm1"], client);
    expect(code).toBe(0);
    expect(c.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
      "GET /apis/kubevirt.io/v1/namespaces/default/virtualmachines/vm1",
      `PUT ${SUB}/virtualmachineinstances/vm1/pause`,
    ]);
  });

  it("pause vm of a Halted VM without VMI says it is not set to run", async () => {
    const client = new FakeClient();
    client.answers.set("GET /apis/kubevirt.io/v1/namespaces/default/virtualmachines/vm1", {
      spec: { runStrategy: "Halted" },
    });
    client.answers.set(`PUT ${SUB}/virtualmachineinstances/vm1/pause`, statusError(404, "NotFound", "not found"));
    const { code, err } = await run(["pause", "vm", "vm1"], client);
    expect(code).toBe(1);
    expect(err).toBe("Error pausing VirtualMachineInstance vm1. VirtualMachine vm1 is not set to run\n");
  });

  it("pause of a paused VMI passes KubeVirt's conflict through", async () => {
    const client = new FakeClient();
    const message = 'Operation cannot be fulfilled on virtualmachineinstance.kubevirt.io "vm1": VMI is already paused';
    client.answers.set(`PUT ${SUB}/virtualmachineinstances/vm1/pause`, conflict(message));
    const { code, err } = await run(["pause", "vmi", "vm1"], client);
    expect(code).toBe(1);
    expect(err).toBe(`Error pausing VirtualMachineInstance vm1: ${message}\n`);
  });

  it("an unknown resource type is an error", async () => {
    expect((await run(["pause", "pod", "x"])).code).toBe(1);
  });
});

describe("migrate-cancel", () => {
  const list = "GET /apis/kubevirt.io/v1/namespaces/default/virtualmachineinstancemigrations";

  it("deletes the first migration that is not final", async () => {
    const client = new FakeClient();
    client.answers.set(list, {
      items: [
        { metadata: { name: "old" }, status: { phase: "Succeeded" } },
        { metadata: { name: "kubevirt-migrate-vm-x7k2p" }, status: { phase: "Running" } },
      ],
    });
    const { code, out } = await run(["migrate-cancel", "vm1"], client);
    expect(code).toBe(0);
    expect(out).toBe("VM vm1 was scheduled to migrate-cancel\n");
    expect(client.requests[0]?.query).toEqual({ labelSelector: "kubevirt.io/vmi-name==vm1" });
    expect(client.requests[1]).toMatchObject({
      method: "DELETE",
      path: "/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstancemigrations/kubevirt-migrate-vm-x7k2p",
    });
  });

  it("says so when there is nothing to cancel", async () => {
    const client = new FakeClient();
    client.answers.set(list, { items: [{ metadata: { name: "old" }, status: { phase: "Failed" } }] });
    const { code, err } = await run(["migrate-cancel", "vm1"], client);
    expect(code).toBe(1);
    expect(err).toBe("Found no migration to cancel for vm1\n");
  });
});

describe("expose", () => {
  it("creates a Service selecting vm.kubevirt.io/name, owned by no one (it outlives the VM, as KubeVirt's)", async () => {
    const client = new FakeClient();
    client.answers.set("GET /apis/kubevirt.io/v1/namespaces/default/virtualmachines/vm-cirros", {
      metadata: { name: "vm-cirros", uid: "u-1" },
      spec: { template: { spec: {} } },
    });
    const { code, out } = await run(
      ["expose", "vm", "vm-cirros", "--name", "vm-cirros-ssh", "--port", "22", "--type", "NodePort"],
      client,
    );
    expect(code).toBe(0);
    expect(out).toBe("Service vm-cirros-ssh successfully created for vm vm-cirros\n");
    const post = client.requests[1];
    expect(post?.path).toBe("/api/v1/namespaces/default/services");
    expect((post?.body as { metadata: unknown } | undefined)?.metadata).toEqual({
      name: "vm-cirros-ssh",
      namespace: "default",
    });
    expect(post?.body).toMatchObject({
      spec: {
        type: "NodePort",
        ports: [{ protocol: "TCP", port: 22, targetPort: 22 }],
        selector: { "vm.kubevirt.io/name": "vm-cirros" },
      },
    });
  });

  it("uses the pod-network interface's ports without --port, named port-<n> as KubeVirt names them", async () => {
    const client = new FakeClient();
    client.answers.set("GET /apis/kubevirt.io/v1/namespaces/default/virtualmachineinstances/v", {
      metadata: { name: "v", uid: "u" },
      spec: {
        networks: [{ name: "default", pod: {} }],
        domain: {
          devices: {
            interfaces: [
              {
                name: "default",
                ports: [
                  { name: "http", port: 80 },
                  { port: 53, protocol: "UDP" },
                ],
              },
            ],
          },
        },
      },
    });
    expect((await run(["expose", "vmi", "v", "--name", "s", "--ip-family", "IPv4,IPv6"], client)).code).toBe(0);
    expect((client.requests[1]?.body as { spec: unknown } | undefined)?.spec).toEqual({
      type: "ClusterIP",
      ipFamilies: ["IPv4", "IPv6"],
      ipFamilyPolicy: "PreferDualStack",
      ports: [
        { name: "port-1", port: 80, protocol: "TCP" },
        { name: "port-2", port: 53, protocol: "UDP" },
      ],
      selector: { "vm.kubevirt.io/name": "v" },
    });
  });

  it.each([
    [["expose", "vm", "x"], 'required flag(s) "name" not set'],
    [["expose", "vm", "x", "--name", "s", "--type", "ExternalName"], "type: ExternalName not supported"],
    [["expose", "vm", "x", "--name", "s", "--protocol", "SCTP"], "unknown protocol: SCTP"],
  ])("virtctl %j fails with %s", async (argv, message) => {
    const { code, err } = await run(argv);
    expect(code).toBe(1);
    expect(err).toContain(message);
  });
});

describe("vmiIdLabelValue", () => {
  it("keeps short names and hashes long ones like KubeVirt (54 chars, '-', 8 hex of SHA-1)", () => {
    expect(vmiIdLabelValue("vm-cirros")).toBe("vm-cirros");
    const long = "a".repeat(70);
    expect(vmiIdLabelValue(long)).toMatch(/^a{54}-[0-9a-f]{8}$/);
    expect(vmiIdLabelValue(long)).toHaveLength(63);
  });
});

describe("CLI", () => {
  it.each([["start"], ["start", "a", "b"], ["pause", "vm"]])(
    "virtctl %j is a usage error (exit 1)",
    async (...argv) => {
      const { code, err } = await run(argv);
      expect(code).toBe(1);
      expect(err).toMatch(/^Error: accepts \d arg\(s\), received \d/);
    },
  );

  it("an unknown flag is an error", async () => {
    const { code, err } = await run(["start", "vm1", "--bogus"]);
    expect(code).toBe(1);
    expect(err).toContain("--bogus");
  });

  it("an unknown command is an error", async () => {
    expect((await run(["frobnicate"])).code).toBe(1);
  });

  it.each(COMMANDS.map((c) => [c.name]))("virtctl %s --help prints usage and exits 0", async (name) => {
    const { code, out } = await run([name, "--help"]);
    expect(code).toBe(0);
    expect(out).toContain(`virtctl ${COMMANDS.find((c) => c.name === name)?.use ?? ""} [flags]`);
  });

  it("version prints client and server version.Info", async () => {
    const client = new FakeClient();
    client.answers.set("GET /apis/subresources.kubevirt.io/v1/version", {
      gitVersion: "v0.1.0",
      platform: "linux/amd64",
    });
    const { code, out } = await run(["version"], client);
    expect(code).toBe(0);
    expect(out).toMatch(/^Client Version: version\.Info\{GitVersion:"v\d+\.\d+\.\d+"/);
    expect(out).toContain('Server Version: version.Info{GitVersion:"v0.1.0", GitCommit:""');
  });
});
