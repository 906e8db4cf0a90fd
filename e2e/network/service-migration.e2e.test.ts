/**
 * A TCP connection through a Service survives `virtctl migrate` (when the cluster runs as root and has its pod
 * network): the demo VM (QEMU here, masquerade binding) runs a line echo server (busybox nc) on 7000; a client opens
 * one connection to the Service's ClusterIP and keeps a paced stream of numbered lines going while the VM migrates.
 * The client is where a user's would be: on the local cluster a process of this host (the local cluster's node, whose
 * service proxy routes ClusterIPs); on a real Kubernetes (tools/kube) a pod on the VMI's source node, whose
 * connection kube-proxy DNATs in that node's namespace (a process in the node's namespace would not do: kube-proxy
 * masquerades it with `fully-random` ports, and a re-made conntrack entry would show the guest another port).
 * The source launcher pod ends, its address leaves the EndpointSlice, and the conntrack entries DNATed to it are
 * deleted (the local service proxy does it; on a real cluster kube-proxy deletes only UDP ones, and virt-handler
 * deletes the rest, apps/virt-handler/src/network/migrated-flows.ts): the stream's next segment is DNATed to the target
 * pod, whose masquerade NAT hands it to the guest, which kept its TCP state and its 10.0.2.2. Every line comes back,
 * in order, on the same connection; the guest sees the same peer address and port before and after; the longest gap
 * between replies is the outage.
 */
import { connect } from "node:net";
import { eventually } from "@kvt/testing";
import { afterAll, describe, expect, inject, it } from "vitest";
import { getJson, kubectl, kubectlOk, kubectlSession, virtctl } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { consoleLog } from "../lib/console-log.ts";
import { httpGuestVm } from "../lib/http-vm.ts";
import { vmiOrUndefined } from "../lib/objects.ts";

const NAME = "e2e-svc-migrate";
const SERVICE = `${NAME}-echo`;
const CLIENT_POD = `${NAME}-client`;
const root = process.getuid?.() === 0;
const BOOT = { ...CLUSTER_WAIT, timeoutMs: 240_000, intervalMs: 1000 };
/** One numbered line every PACE_MS while the VM migrates. */
const PACE_MS = 20;

/**
 * A line echo server on 7000 (busybox nc forks the script per connection): `addr` answers the guest's eth0 address,
 * `peer` the connection as the guest sees it (local and foreign address), anything else comes back as is.
 */
const ECHO_USER_DATA = `cat >/tmp/echo.sh <<'EOS'
#!/bin/sh
while read -r line; do
  case "$line" in
    addr) echo "addr $(ip -4 -o addr show dev eth0 | tr -s ' ' | cut -d' ' -f4)" ;;
    peer) echo "peer $(netstat -tn | grep ':7000 ' | grep ESTABLISHED | tr -s ' ' | cut -d' ' -f4,5 | sed 's/::ffff://g')" ;;
    *) echo "$line" ;;
  esac
done
EOS
chmod +x /tmp/echo.sh
setsid nc -ll -p 7000 -e /tmp/echo.sh </dev/null >/dev/null 2>&1 &
echo kvt-echo-up
`;

/** Where a client's bytes go: a socket of this process, or a relay in a pod. */
interface LineTransport {
  write(text: string): void;
  close(): void;
}

/** A line-oriented client on one connection: each reply line with the time it arrived. */
class LineClient {
  readonly lines: { text: string; at: number }[] = [];
  #buf = "";
  #closed: string | undefined;
  /** When the connection ended (performance.now()), if it has. */
  endedAt: number | undefined;
  /** The connection's own end (`address:port`), as the guest should see its peer. */
  local = "";
  readonly transport: LineTransport;
  constructor(transport: LineTransport) {
    this.transport = transport;
  }

  /** Takes bytes that arrived. */
  feed(d: string): void {
    this.#buf += d;
    for (let i = this.#buf.indexOf("\n"); i >= 0; i = this.#buf.indexOf("\n")) {
      this.lines.push({ text: this.#buf.slice(0, i), at: performance.now() });
      this.#buf = this.#buf.slice(i + 1);
    }
  }

  /** The connection ended (reset, closed), for `reason`. */
  end(reason: string): void {
    this.#closed ??= reason;
    this.endedAt ??= performance.now();
  }

  /** Throws when the connection has ended (reset, closed), saying when and after which reply. */
  alive(since = 0): void {
    if (!this.#closed) return;
    const last = this.lines.at(-1)?.text;
    const at = Math.round((this.endedAt ?? 0) - since);
    throw new Error(`the connection ended ${at} ms in (last reply "${String(last)}"): ${this.#closed}`);
  }

  /** Sends `line` and waits for the first reply starting with `prefix`. */
  async ask(line: string, prefix: string, timeoutMs = 20_000): Promise<string> {
    const from = this.lines.length;
    this.transport.write(`${line}\n`);
    return eventually(
      async () => {
        this.alive();
        const got = this.lines.slice(from).find((l) => l.text.startsWith(prefix));
        expect(got, `a reply to ${line}`).toBeDefined();
        return got!.text;
      },
      { timeoutMs, intervalMs: 50 },
    );
  }
}

/** A connection from this process to `host:port`, rejecting on error. */
function openHere(host: string, port: number): Promise<LineClient> {
  return new Promise((resolve, reject) => {
    const s = connect({ host, port, timeout: 5000 });
    s.once("connect", () => {
      s.setTimeout(0);
      s.setNoDelay(true);
      s.setEncoding("utf8");
      const c = new LineClient({ write: (t) => s.write(t), close: () => s.destroy() });
      c.local = `${s.localAddress}:${s.localPort}`;
      s.on("data", (d: string) => c.feed(d));
      s.on("error", (err) => c.end(`error: ${err.message}`));
      s.on("close", () => c.end("closed"));
      resolve(c);
    });
    s.once("timeout", () => {
      s.destroy();
      reject(new Error(`connect ${host}:${port} timed out`));
    });
    s.once("error", reject);
  });
}

/**
 * The client pod's relay (Node, the release image's runtime): one connection to argv[1]:argv[2], its own end first
 * (`local <address>:<port>`), then stdin to the connection and the connection to stdout; it exits when the
 * connection ends.
 */
const RELAY = `const s = require("node:net").connect({ host: process.argv[1], port: Number(process.argv[2]) }, () => {
  s.setNoDelay(true);
  process.stdout.write("local " + s.localAddress + ":" + s.localPort + "\\n");
  process.stdin.pipe(s);
  s.pipe(process.stdout);
});
s.on("error", (e) => { process.stderr.write(e.message + "\\n"); process.exit(1); });
s.on("close", () => process.exit(2));`;

/** A connection from pod `pod` to `host:port` through `kubectl exec -i` and {@link RELAY}. */
async function openInPod(kubeconfig: string, pod: string, host: string, port: number): Promise<LineClient> {
  const child = kubectlSession(kubeconfig, [
    "exec",
    "-i",
    pod,
    "--",
    "/usr/local/bin/node",
    "-e",
    RELAY,
    host,
    String(port),
  ]);
  const c = new LineClient({ write: (t) => child.stdin.write(t), close: () => child.kill("SIGKILL") });
  let stderr = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (d: string) => c.feed(d));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  child.stdin.on("error", () => {});
  child.on("close", (code) => c.end(`kubectl exec exited ${String(code)}: ${stderr.trim()}`));
  try {
    const local = await eventually(
      async () => {
        c.alive();
        const line = c.lines.find((l) => l.text.startsWith("local "));
        expect(line, "the relay's own address").toBeDefined();
        return line!.text.slice("local ".length);
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    c.local = local;
    return c;
  } catch (err) {
    child.kill("SIGKILL");
    throw err;
  }
}

interface PodNet {
  metadata: { uid: string; creationTimestamp: string };
  status?: { phase?: string; podIP?: string };
}

/** The launcher pods of a VMI with their addresses, oldest first. */
async function launcherPods(kubeconfig: string, vmiUid: string): Promise<PodNet[]> {
  const args = ["get", "pods", "-l", `kubevirt.io/created-by=${vmiUid}`, "-o", "json"];
  const list = JSON.parse(await kubectlOk(kubeconfig, args)) as { items: PodNet[] };
  return list.items.sort((a, b) => a.metadata.creationTimestamp.localeCompare(b.metadata.creationTimestamp));
}

/** The client pod: the release's image (it has Node) idling until the test execs the relay in it. */
function relayPod(image: string, nodeName: string): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: CLIENT_POD },
    spec: {
      nodeSelector: { "kubernetes.io/hostname": nodeName },
      restartPolicy: "Never",
      terminationGracePeriodSeconds: 0,
      containers: [
        { name: "client", image, command: ["/usr/local/bin/node", "-e", "setInterval(() => {}, 3_600_000)"] },
      ],
    },
  };
}

interface Slice {
  endpoints?: { addresses: string[]; conditions?: { ready?: boolean } }[];
}

describe.runIf(root)("a TCP connection through a Service survives a live migration", () => {
  const kubeconfig = inject("kubeconfig");
  const kube = inject("clusterKind") === "kube";
  let client: LineClient | undefined;
  afterAll(async () => {
    client?.transport.close();
    await kubectl(kubeconfig, ["delete", "pod", CLIENT_POD, "--ignore-not-found", "--wait=false"]);
    await kubectl(kubeconfig, ["delete", "svc", SERVICE, "--ignore-not-found", "--wait=false"]);
    await kubectl(kubeconfig, ["delete", "vm", NAME, "--ignore-not-found", "--wait=false"]);
  });

  it("keeps the connection, the guest's address and the peer it sees across `virtctl migrate`", async () => {
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(httpGuestVm(NAME, "masquerade", ECHO_USER_DATA)));
    const vmi = await eventually(async () => {
      const v = await vmiOrUndefined(kubeconfig, NAME);
      expect(v?.status?.phase).toBe("Running");
      return v!;
    }, BOOT);
    const expose = ["expose", "vmi", NAME, "--name", SERVICE, "--port", "17000", "--target-port", "7000"];
    const exposed = await virtctl(kubeconfig, expose);
    expect(exposed.code, exposed.stderr).toBe(0);
    const clusterIP = (await getJson<{ spec: { clusterIP: string } }>(kubeconfig, "svc", SERVICE)).spec.clusterIP;
    // The addresses the Service routes to: ready endpoints (kube-controller-manager keeps a finished source pod in
    // the slice as not ready).
    const sliceAddresses = async (): Promise<string[]> => {
      const args = ["get", "endpointslices", "-l", `kubernetes.io/service-name=${SERVICE}`, "-o", "json"];
      const list = JSON.parse(await kubectlOk(kubeconfig, args)) as { items: Slice[] };
      const ready = list.items.flatMap((s) => (s.endpoints ?? []).filter((e) => e.conditions?.ready !== false));
      return ready.flatMap((e) => e.addresses).sort();
    };
    const [source] = await launcherPods(kubeconfig, vmi.metadata.uid);
    const sourceIP = source?.status?.podIP;
    expect(sourceIP).toBeDefined();
    await eventually(async () => {
      expect(await sliceAddresses()).toEqual([sourceIP]);
      const log = await consoleLog(kubeconfig, vmi.metadata.uid);
      expect(log).toContain("kvt-echo-up");
      return true;
    }, BOOT);

    // The client: on a real cluster a pod on the VMI's node, from the release's own image (Node, for the relay).
    let open = (): Promise<LineClient> => openHere(clusterIP, 17000);
    if (kube) {
      const image = await kubectlOk(kubeconfig, [
        ...["get", "ds", "virt-handler", "-n", "kubevirt", "-o"],
        "jsonpath={.spec.template.spec.containers[0].image}",
      ]);
      await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(relayPod(image, vmi.status?.nodeName ?? "")));
      await kubectlOk(kubeconfig, ["wait", "--for=condition=Ready", `pod/${CLIENT_POD}`, "--timeout=120s"]);
      open = () => openInPod(kubeconfig, CLIENT_POD, clusterIP, 17000);
    }
    // One connection to the ClusterIP (the echo server may take a moment after its marker).
    client = await eventually(
      async () => {
        const c = await open();
        try {
          await c.ask("hello", "hello", 3000);
        } catch (err) {
          c.transport.close();
          throw err;
        }
        return c;
      },
      { ...CLUSTER_WAIT, timeoutMs: 60_000, intervalMs: 1000 },
    );
    const c = client;
    const addrBefore = await c.ask("addr", "addr ");
    expect(addrBefore).toBe("addr 10.0.2.2/24");
    const peerBefore = await c.ask("peer", "peer ");
    // The guest sees the client's own end: on the local cluster the bridge address and the socket's own port (the
    // proxy masquerades to the bridge address and keeps the port); on a real cluster the client pod's address and port
    // (kube-proxy leaves pod traffic to a ClusterIP unmasqueraded).
    expect(peerBefore).toBe(`peer 10.0.2.2:7000 ${c.local}`);

    // A paced stream of numbered lines across the migration.
    let sent = 0;
    const pacer = setInterval(() => {
      c.transport.write(`seq ${++sent}\n`);
    }, PACE_MS);
    try {
      await eventually(async () => {
        expect(c.lines.filter((l) => l.text.startsWith("seq ")).length).toBeGreaterThan(10);
        return true;
      }, CLUSTER_WAIT);
      const started = performance.now();
      const migrate = await virtctl(kubeconfig, ["migrate", NAME]);
      expect(migrate.code, migrate.stderr).toBe(0);
      // A connection that ended fails the test at once (eventually would retry until its timeout). Either outcome is
      // a value: eventually takes false (as undefined) for "not yet".
      const outcome = await eventually(
        async () => {
          if (c.endedAt !== undefined) return "connection ended";
          const v = await vmiOrUndefined(kubeconfig, NAME);
          expect(v?.status?.migrationState?.failed).toBeFalsy();
          expect(v?.status?.migrationState?.completed).toBe(true);
          return "migrated";
        },
        { ...BOOT, intervalMs: 250, what: "the migration to complete" },
      );
      if (outcome === "connection ended") c.alive(started);
      const completed = performance.now();
      const targetIP = await eventually(
        async () => {
          const pods = await launcherPods(kubeconfig, vmi.metadata.uid);
          const target = pods.find((p) => p.metadata.uid !== source?.metadata.uid && p.status?.phase === "Running");
          expect(target?.status?.podIP).toBeDefined();
          expect(await sliceAddresses()).toEqual([target?.status?.podIP]);
          return target!.status!.podIP!;
        },
        { ...CLUSTER_WAIT, what: "the EndpointSlice to list the target pod alone" },
      );
      expect(targetIP).not.toBe(sourceIP);
      // Lines sent after the migration completed come back on the same socket.
      const mark = sent;
      await eventually(
        async () => {
          if (c.endedAt !== undefined) return true;
          const last = c.lines.filter((l) => l.text.startsWith("seq ")).at(-1);
          expect(Number(last?.text.slice(4))).toBeGreaterThan(mark + 5);
          return true;
        },
        { ...CLUSTER_WAIT, what: "replies on the same connection after the migration" },
      );
      c.alive(started);
      clearInterval(pacer);
      const replies = c.lines.filter((l) => l.text.startsWith("seq "));
      // Every line came back once, in order (TCP's stream went on; nothing was restarted).
      const last = Number(replies.at(-1)?.text.slice(4));
      expect(replies.map((l) => l.text)).toEqual(Array.from({ length: last }, (_, i) => `seq ${i + 1}`));
      let outageMs = 0;
      for (let i = 1; i < replies.length; i++) {
        if ((replies[i]?.at ?? 0) < started) continue;
        outageMs = Math.max(outageMs, (replies[i]?.at ?? 0) - (replies[i - 1]?.at ?? 0));
      }
      const figures = {
        outageMs: Math.round(outageMs),
        paceMs: PACE_MS,
        migrateToCompletedMs: Math.round(completed - started),
        lines: replies.length,
        sourceIP,
        targetIP,
      };
      console.log(`[service migration figures] ${JSON.stringify(figures)}`);
      // The guest kept its address, and sees the same connection (peer address and port) as before.
      expect(await c.ask("addr", "addr ")).toBe(addrBefore);
      expect(await c.ask("peer", "peer ")).toBe(peerBefore);
    } finally {
      clearInterval(pacer);
    }
  }, 300_000);
});
