/**
 * Access to a VM as KubeVirt's users have it (when the cluster runs as root and has its pod network): the demo VM
 * (QEMU here) runs its HTTP server and dropbear behind the masquerade binding, with root's key from
 * `accessCredentials` (a Secret, noCloud propagation). Through the `portforward` subresource (API server ->
 * virt-api -> virt-handler -> virt-launcher -> the guest's port):
 *   - `virtctl port-forward vm/NAME 0:8080 0:22` serves the guest's HTTP page and its SSH banner on local ports;
 *   - `virtctl ssh -i KEY -c "echo hi" root@vmi/NAME` runs the command through the real OpenSSH client, and
 *     `virtctl scp` copies a file in and out;
 *   - a key the guest does not know, a closed port, a stopped VM, no credentials and malformed paths all give
 *     clear errors (Statuses), and virt-api keeps serving after them.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadKubeConfig } from "@kvt/kube";
import { eventually } from "@kvt/testing";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import WebSocket from "ws";
import { kubectl, kubectlOk, virtctl } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { consoleLog } from "../lib/console-log.ts";
import { httpGuestVm } from "../lib/http-vm.ts";
import { vmiOrUndefined } from "../lib/objects.ts";

const NAME = "e2e-access";
const STOPPED = "e2e-access-stopped";
const SECRET = "e2e-access-keys";
const root = process.getuid?.() === 0;
const BOOT = { ...CLUSTER_WAIT, timeoutMs: 240_000, intervalMs: 1000 };
const VIRTCTL = join(new URL("../../", import.meta.url).pathname, "apps/virtctl/src/main.ts");
const SUB = "/apis/subresources.kubevirt.io/v1/namespaces/default";
/** OpenSSH options for a throwaway guest: its host key is new on every boot. */
const NO_HOST_CHECK = [
  "--local-ssh-opts=-oStrictHostKeyChecking=no",
  "--local-ssh-opts=-oUserKnownHostsFile=/dev/null",
];

/** Reads the first bytes a TCP server sends. */
function banner(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = createConnection(port, "127.0.0.1");
    socket.setTimeout(30_000, () => socket.destroy(new Error("no banner within 30 s")));
    socket.once("data", (d: Buffer) => {
      socket.destroy();
      resolve(d.toString());
    });
    socket.once("error", reject);
  });
}

/** Opens the portforward WebSocket at `path` as the kubeconfig's user (or with no credentials); the refusal. */
async function refusal(kubeconfig: string, path: string, withCredentials = true) {
  const config = loadKubeConfig({ kubeconfig });
  const credentials: Record<string, unknown> = { headers: {} };
  await config.applyToHTTPSOptions(credentials);
  // Anonymous: the cluster's CA only, no token or client certificate.
  const opts = withCredentials ? credentials : { ca: credentials.ca };
  const server = config.getCurrentCluster()?.server ?? "";
  return new Promise<{ status: number; body: { kind?: string; reason?: string; message?: string; code?: number } }>(
    (resolve, reject) => {
      const ws = new WebSocket(`${server.replace(/^http/, "ws")}${path}`, ["plain.kubevirt.io"], opts);
      ws.once("open", () => {
        ws.close();
        reject(new Error(`${path} was upgraded`));
      });
      ws.once("unexpected-response", (_req, res) => {
        let text = "";
        res.on("data", (d: Buffer) => {
          text += d.toString();
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as never }));
      });
      ws.once("error", reject);
    },
  );
}

describe.runIf(root)("port-forward, ssh and scp to a VM (the portforward subresource)", () => {
  const kubeconfig = inject("kubeconfig");
  const keys = mkdtempSync(join(tmpdir(), "kvt-e2e-ssh-"));
  const key = join(keys, "id_ed25519");
  const stranger = join(keys, "stranger");

  beforeAll(async () => {
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "e2e@host", "-f", key]);
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", stranger]);
    await kubectlOk(kubeconfig, ["create", "secret", "generic", SECRET, `--from-file=key1=${key}.pub`]);
    const vm = httpGuestVm(NAME) as { spec: { template: { spec: Record<string, unknown> } } };
    vm.spec.template.spec.accessCredentials = [
      { sshPublicKey: { source: { secret: { secretName: SECRET } }, propagationMethod: { noCloud: {} } } },
    ];
    const stopped = httpGuestVm(STOPPED) as { spec: Record<string, unknown> };
    stopped.spec.running = false;
    await kubectlOk(
      kubeconfig,
      ["create", "-f", "-"],
      JSON.stringify({ kind: "List", apiVersion: "v1", items: [vm, stopped] }),
    );
  });

  afterAll(async () => {
    await kubectl(kubeconfig, ["delete", "vm", NAME, STOPPED, "--ignore-not-found", "--wait=false"]);
    await kubectl(kubeconfig, ["delete", "secret", SECRET, "--ignore-not-found", "--wait=false"]);
    rmSync(keys, { recursive: true, force: true });
  });

  it("forwards local ports to the guest's HTTP server and SSH server", async () => {
    const vmi = await eventually(async () => {
      const v = await vmiOrUndefined(kubeconfig, NAME);
      expect(v?.status?.phase).toBe("Running");
      return v!;
    }, BOOT);
    await eventually(async () => {
      expect(await consoleLog(kubeconfig, vmi.metadata.uid)).toContain("kvt-http-up");
      return true;
    }, BOOT);
    const child = spawn(process.execPath, [VIRTCTL, "port-forward", `vm/${NAME}`, "0:8080", "0:22"], {
      env: { ...process.env, KUBECONFIG: kubeconfig },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let log = "";
    child.stderr.on("data", (d: Buffer) => (log += d.toString()));
    try {
      const ports = await eventually(async () => {
        const http = /forwarding tcp 127\.0\.0\.1:(\d+) to 8080/.exec(log)?.[1];
        const ssh = /forwarding tcp 127\.0\.0\.1:(\d+) to 22/.exec(log)?.[1];
        expect(http && ssh, log).toBeTruthy();
        return { http: Number(http), ssh: Number(ssh) };
      }, CLUSTER_WAIT);
      const page = await fetch(`http://127.0.0.1:${ports.http}/`, { signal: AbortSignal.timeout(30_000) });
      expect(await page.text()).toBe(`hello from ${NAME}\n`);
      expect(await banner(ports.ssh)).toMatch(/^SSH-2\.0-dropbear/);
    } finally {
      child.kill("SIGINT");
    }
  });

  it("`virtctl ssh -i KEY -c` runs a command through OpenSSH, and scp copies in and out", async () => {
    const ssh = await virtctl(
      kubeconfig,
      ["ssh", "-i", key, ...NO_HOST_CHECK, "-c", "echo hi; hostname", `root@vmi/${NAME}`],
      undefined,
      90_000,
    );
    expect(ssh.code, ssh.stderr).toBe(0);
    expect(ssh.stdout).toBe(`hi\n${NAME}\n`);
    const local = join(keys, "payload.txt");
    writeFileSync(local, "payload through scp\n");
    const up = await virtctl(
      kubeconfig,
      ["scp", "-i", key, ...NO_HOST_CHECK, local, `root@vm/${NAME}:/tmp/p`],
      undefined,
      90_000,
    );
    expect(up.code, up.stderr).toBe(0);
    const down = await virtctl(
      kubeconfig,
      ["scp", "-i", key, ...NO_HOST_CHECK, `root@vmi/${NAME}/default:/tmp/p`, join(keys, "back.txt")],
      undefined,
      90_000,
    );
    expect(down.code, down.stderr).toBe(0);
    expect(readFileSync(join(keys, "back.txt"), "utf8")).toBe("payload through scp\n");
  });

  it("refuses an unknown key, a closed port and a stopped VM with clear errors", async () => {
    const denied = await virtctl(
      kubeconfig,
      ["ssh", "-i", stranger, ...NO_HOST_CHECK, "--local-ssh-opts=-oBatchMode=yes", "-c", "true", `root@vmi/${NAME}`],
      undefined,
      60_000,
    );
    expect(denied.code).toBe(255); // ssh's own status for a failed login
    expect(denied.stderr).toContain("Permission denied (publickey)");
    const closed = await virtctl(kubeconfig, ["port-forward", "--stdio", `vmi/${NAME}`, "23"]);
    expect(closed.code).toBe(1);
    expect(closed.stderr).toContain(
      "Can't connect to websocket (500): Internal error occurred: dialing VM: dial tcp 10.0.2.2:23: connect: connection refused",
    );
    const stopped = await virtctl(kubeconfig, ["port-forward", "--stdio", `vm/${STOPPED}`, "22"]);
    expect(stopped.code).toBe(1);
    expect(stopped.stderr).toContain(
      `Can't connect to websocket (409): Operation cannot be fulfilled on virtualmachine.kubevirt.io "${STOPPED}": VMI is not started`,
    );
  });

  it("answers no credentials and malformed requests with a Status, and keeps serving", async () => {
    const anonymous = await refusal(kubeconfig, `${SUB}/virtualmachineinstances/${NAME}/portforward/22`, false);
    // No credentials: system:anonymous (kube-apiserver's default --anonymous-auth, which the embedded server
    // follows), whom RBAC refuses.
    expect(anonymous.status).toBe(403);
    expect(anonymous.body).toMatchObject({ kind: "Status", reason: "Forbidden" });
    expect(anonymous.body.message).toContain(
      'User "system:anonymous" cannot get resource "virtualmachineinstances/portforward" in API group "subresources.kubevirt.io"',
    );
    for (const [path, code, message] of [
      [`${SUB}/virtualmachineinstances/${NAME}/portforward/abc`, 400, 'invalid port "abc"'],
      [`${SUB}/virtualmachineinstances/${NAME}/portforward/99999/tcp`, 400, 'invalid port "99999"'],
      [`${SUB}/virtualmachineinstances/${NAME}/portforward/22/sctp`, 400, 'unsupported protocol "sctp"'],
      [
        `${SUB}/virtualmachineinstances/nope/portforward/22`,
        404,
        'virtualmachineinstance.kubevirt.io "nope" not found',
      ],
    ] as const) {
      const answer = await refusal(kubeconfig, path);
      expect(answer.status, path).toBe(code);
      expect(answer.body).toMatchObject({ kind: "Status", code });
      expect(answer.body.message).toContain(message);
    }
    const ssh = await virtctl(kubeconfig, ["ssh", "-i", key, ...NO_HOST_CHECK, "-c", "echo still", `root@vm/${NAME}`]);
    expect(ssh.stdout, ssh.stderr).toBe("still\n");
  });
});
