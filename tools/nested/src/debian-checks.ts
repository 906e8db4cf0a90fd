/**
 * Issue 17's real distribution, booted from its disk on our VMM inside L1: a VMI whose containerDisk is
 * `local/debian-cloud:latest` (Debian 12, systemd, cloud-init; root filesystem on a raw ext4 disk, kernel and initrd
 * beside it) and whose cloudInitNoCloud volume carries user data, run by a real virt-launcher process driven over
 * launcher-rpc as virt-handler drives it (launcher-peer.ts).
 *
 *   debianVmi()                         launcher (node-a)                          guest (L2 on L1's KVM)
 *   sync {vmi} ------------------------> containerDisk overlay = vda (root=/dev/vda) initramfs mounts vda, systemd
 *                                        cloudInitNoCloud ISO "cidata" = vdb  -->  cloud-init NoCloud: write_files,
 *                                                                                  runcmd line, password, ssh key
 *   console <--------------------------- runcmd's line, the boot marker (a unit after cloud-final), `login:`
 *   login debian / password -----------> bash: `echo hi`, the written file, ~/.ssh/authorized_keys, findmnt /
 *   `sudo poweroff` -------------------> domain Shutdown, launcher exits 0
 *
 * There is no network in L1 for an ssh client to reach the guest by, so the key is checked where sshd would read it.
 * Check names start with `debian-`; `guest-checks.ts debian` runs only these.
 */
import { generateKeyPairSync, randomBytes, randomUUID } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defaultVmi, type VirtualMachineInstance } from "@kvt/api";
import { DEBIAN_CLOUD_BOOT_MARKER, DEBIAN_CLOUD_IMAGE } from "@kvt/images";
import { check, converse, typeLine, within } from "./check-runner.ts";
import { attachConsole, type LauncherConsole, type LauncherPeer, startLauncher } from "./launcher-peer.ts";

/** A launcher's Node start under TCG (L1) takes tens of seconds; its socket appears only after that. */
const LAUNCHER_START_MS = 240_000;
/** Copying the 1 GiB containerDisk from the build host (9p) into L1's tmpfs is part of `sync`. */
const SYNC_MS = 300_000;
/** Debian's default user (cloud-init's `default_user` in Debian's cloud.cfg). */
export const DEBIAN_USER = "debian";
/** The file the user data writes, and the line its runcmd prints on the console. */
const WRITTEN_FILE = "/var/lib/kvt/user-data.txt";
const USERDATA_LINE = "KVT_DEBIAN_USERDATA";

/** What one run's user data puts in the guest: a token in a file, the console password, an SSH key. */
export interface DebianUserData {
  readonly token: string;
  readonly password: string;
  /** An OpenSSH public key line (`ssh-ed25519 AAAA... comment`). */
  readonly sshKey: string;
}

/** A fresh ed25519 public key in OpenSSH's authorized_keys form (the private half is thrown away). */
export function newSshKey(comment: string): string {
  const { publicKey } = generateKeyPairSync("ed25519");
  const raw = Buffer.from(publicKey.export({ format: "jwk" }).x ?? "", "base64url");
  const field = (b: Buffer): Buffer => Buffer.concat([Buffer.from([0, 0, 0, b.length]), b]);
  const blob = Buffer.concat([field(Buffer.from("ssh-ed25519")), field(raw)]);
  return `ssh-ed25519 ${blob.toString("base64")} ${comment}`;
}

/** The #cloud-config a user would write for this: a file, a console line, a password and a key for the default user. */
export function debianUserData(d: DebianUserData): string {
  return [
    "#cloud-config",
    `password: ${d.password}`,
    "chpasswd: { expire: false }",
    "ssh_authorized_keys:",
    `  - ${d.sshKey}`,
    "write_files:",
    `  - path: ${WRITTEN_FILE}`,
    `    content: "written by cloud-init ${d.token}\\n"`,
    "runcmd:",
    `  - [ sh, -c, "echo ${USERDATA_LINE} $(cat ${WRITTEN_FILE}) > /dev/console" ]`,
    "",
  ].join("\n");
}

/** A KubeVirt VMI with the Debian containerDisk first (vda, the root) and the cloudInitNoCloud volume second. */
export function debianVmi(identity: { namespace: string; uid: string }, userData: string): VirtualMachineInstance {
  return defaultVmi({
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: { name: "debian-cloud", namespace: identity.namespace, uid: identity.uid },
    spec: {
      domain: {
        resources: { requests: { memory: "512Mi" } },
        devices: {
          disks: [
            { name: "containerdisk", disk: { bus: "virtio" } },
            { name: "cloudinitdisk", disk: { bus: "virtio" } },
          ],
        },
      },
      volumes: [
        { name: "containerdisk", containerDisk: { image: DEBIAN_CLOUD_IMAGE } },
        { name: "cloudinitdisk", cloudInitNoCloud: { userData } },
      ],
    },
  });
}

/** Runs the debian checks; `bootTimeoutMs` bounds the boot to the marker (systemd and cloud-init under TCG). */
export async function debianChecks(bootTimeoutMs: number): Promise<void> {
  const data: DebianUserData = {
    token: randomBytes(6).toString("hex"),
    password: `kvt-${randomBytes(6).toString("hex")}`,
    sshKey: newSshKey("kvt-debian-check"),
  };
  const uid = randomUUID();
  const vmi = debianVmi({ namespace: "default", uid }, debianUserData(data));
  const who = { namespace: "default", name: vmi.metadata?.name ?? "", uid };
  const root = join(tmpdir(), `kvt-debian-${uid.slice(0, 8)}`);
  let peer: LauncherPeer | undefined;
  let console: LauncherConsole | undefined;
  try {
    await check("debian-launcher-sync", async () => {
      const t0 = performance.now();
      peer = await startLauncher({ nodeName: "node-a", nodeDir: join(root, "node-a"), vmi: who }, LAUNCHER_START_MS);
      const served = performance.now() - t0;
      const info = await peer.client.sync({ vmi: vmi as unknown as Record<string, unknown> }, { timeoutMs: SYNC_MS });
      if (info.state !== "Running") throw new Error(`sync left the domain ${info.state} (${info.reason ?? ""})`);
      if (info.backend !== "native" || info.emulated)
        throw new Error(`backend ${info.backend} (emulated ${info.emulated}): ${info.backendReason ?? ""}`);
      const synced = performance.now() - t0 - served;
      console = await attachConsole(peer.client);
      return `launcher serving after ${Math.round(served)} ms, sync (disk overlay made) ${Math.round(synced)} ms`;
    });
    if (peer && console && !(await guestChecks(peer, console, data, bootTimeoutMs))) dumpConsole(console);
  } finally {
    console?.close();
    await peer?.kill();
  }
}

/** bash's bracketed-paste escapes (ESC [ ? 2004 h/l) around a command's output, when still on. */
const PASTE_ESCAPE = "\x1b\\[\\?2004[hl]";

/**
 * Types `command` once (the shell is up: retyping a slow command, say a Python one under TCG, only queues more) and
 * waits for a line that is exactly `body` (a regex source); returns that line without escapes.
 */
async function ask(con: LauncherConsole, command: string, body: string, ms: number): Promise<string> {
  const from = con.console.mark();
  typeLine(con, command);
  const m = await con.console.waitFor(new RegExp(`^(?:${PASTE_ESCAPE})?${body}$`), ms, from);
  return m.line.replace(new RegExp(PASTE_ESCAPE, "g"), "");
}

/** The guest's whole console (after a failure: systemd's and cloud-init's errors are there), shown by --verbose. */
function dumpConsole(con: LauncherConsole): void {
  for (const line of con.console.text.split("\n")) process.stdout.write(`debian console| ${line}\n`);
}

/** The checks on the running guest; false when one failed. */
async function guestChecks(
  peer: LauncherPeer,
  con: LauncherConsole,
  data: DebianUserData,
  bootTimeoutMs: number,
): Promise<boolean> {
  let failed = 0;
  const step = async (name: string, fn: () => Promise<string | undefined>): Promise<boolean> => {
    const ok = await check(name, fn);
    if (!ok) failed++;
    return ok;
  };
  const booted = await step("debian-boot", async () => {
    // The whole line (a partial last line would match too): the marker's details end with ")".
    const m = await con.console.waitFor(new RegExp(`${DEBIAN_CLOUD_BOOT_MARKER} \\(.*\\)$`), bootTimeoutMs);
    return `marker ${(m.atMs / 1000).toFixed(1)} s after the console attached: ${m.line.trim()}`;
  });
  if (!booted) return false;
  await step("debian-cloud-init-userdata", async () => {
    const m = await con.console.waitFor(new RegExp(`${USERDATA_LINE} written by cloud-init ${data.token}`), 10_000);
    return m.line.trim();
  });
  const loggedIn = await step("debian-console-login", async () => {
    // An empty line makes agetty print its prompt again (cloud-init's messages may have scrolled it away).
    await converse(con, "", /login: *$/, 60_000);
    const from = con.console.mark();
    typeLine(con, DEBIAN_USER);
    await con.console.waitFor(/Password: *$/, 60_000, from);
    typeLine(con, data.password);
    // bash wraps each command's output in bracketed-paste escapes; off, the answers are plain lines.
    typeLine(con, "bind 'set enable-bracketed-paste off'");
    const hi = await converse(con, "echo h''i", new RegExp(`^(?:${PASTE_ESCAPE})?hi$`), 120_000);
    return `logged in as ${DEBIAN_USER}: ${hi.line.replace(new RegExp(PASTE_ESCAPE, "g"), "")}`;
  });
  if (!loggedIn) return false;
  await step("debian-user-data-file", async () => {
    const got = await ask(con, `echo F=$(cat ${WRITTEN_FILE}) E`, "F=.* E", 30_000);
    if (got !== `F=written by cloud-init ${data.token} E`) throw new Error(`the guest reads ${got}`);
    return `${WRITTEN_FILE} on the root disk: ${got.slice(2, -2)}`;
  });
  await step("debian-ssh-key", async () => {
    const blob = data.sshKey.split(" ")[1] ?? "";
    const got = await ask(con, "cat ~/.ssh/authorized_keys", "ssh-ed25519 \\S+ kvt-debian-check", 30_000);
    if (!got.includes(blob)) throw new Error(`authorized_keys holds ${got}, not the user data's key`);
    return `/home/${DEBIAN_USER}/.ssh/authorized_keys holds the user data's key (${blob.slice(-12)})`;
  });
  await step("debian-root-on-vda", async () => {
    const got = await ask(con, "echo R=$(findmnt -no SOURCE /) $(cloud-id) E", "R=.* E", 30_000);
    if (got !== "R=/dev/vda nocloud E") throw new Error(`root and datasource: ${got}`);
    return "/ is /dev/vda (the containerDisk), cloud-init's datasource is nocloud";
  });
  await step("debian-cloud-init-status", async () => {
    const got = await ask(con, "echo S=$(cloud-init status --long|tr '\\n' ' ') E", "S=.* E", 60_000);
    if (!/status: done/.test(got)) throw new Error(`cloud-init reports: ${got.slice(2, -2)}`);
    return got.slice(2, -2).trim();
  });
  await step("debian-boot-profile", async () => {
    const time = await ask(con, "echo T=$(systemd-analyze time|head -1) E", "T=.* E", 60_000);
    const blame = await ask(con, "echo B=$(systemd-analyze blame|head -6) E", "B=.* E", 60_000);
    return `${time.slice(2, -2)}; slowest units: ${blame.slice(2, -2).replace(/\s+/g, " ")}`;
  });
  await step("debian-poweroff", async () => {
    typeLine(con, "sudo poweroff");
    const code = await within(peer.exited, 180_000, "the launcher's exit after `sudo poweroff`");
    if (code !== 0) throw new Error(`the launcher exited with ${code}; log: ${peer.logTail()}`);
    return "the guest powered off (systemd), launcher exit code 0";
  });
  return failed === 0;
}
