/**
 * A short path to a node's pods directory, the local stand-in for KubeVirt's `kubelet-pods-shortened` mount.
 *
 * A launcher listens on `<pods dir>/<pod uid>/volumes/kubernetes.io~empty-dir/sockets/launcher-sock` (its `sockets`
 * emptyDir) and virt-handler connects there, but a unix socket path ends at 107 bytes: the uid and the emptyDir
 * layout take 91 of them, and QEMU's migration socket in the `private` emptyDir (`migrate-out.sock`) 94. On a real
 * node the launcher binds inside its own mount namespace (/var/run/kubevirt/...) and KubeVirt mounts
 * /var/lib/kubelet/pods into virt-handler at /pods. Processes here share the host's filesystem, so the kubelet makes
 * a symlink instead,
 *
 *   /tmp/kvt<5 base-36 digits of sha256(<node data dir>/pods)>  ->  <node data dir>/pods
 *
 * (13 bytes), tells containers their emptyDirs' host paths through it (KVT_VOLUME_MOUNTS), and the local cluster
 * passes the same path to the node's virt-handler as its kubelet pods directory. The files stay in the kubelet's
 * real layout under its data dir; the link is only a name. The kubelet makes it at start, removes it at stop, and
 * removes links of this shape whose directory is gone (a node that crashed).
 */
import { createHash } from "node:crypto";
import { lstatSync, readdirSync, readlinkSync, rmSync, statSync, symlinkSync } from "node:fs";
import { join, resolve } from "node:path";

const LINK_DIR = "/tmp";
const LINK_NAME = /^kvt[0-9a-z]{5}$/;

/** The short link of the pods directory of the node whose kubelet data dir is `nodeDataDir`. */
export function podsLinkPath(nodeDataDir: string): string {
  const pods = join(resolve(nodeDataDir), "pods");
  const digits = createHash("sha256").update(pods).digest().readUIntBE(0, 6).toString(36).padStart(5, "0");
  return join(LINK_DIR, `kvt${digits.slice(-5)}`);
}

/**
 * Makes the link of `nodeDataDir`'s pods directory, which must exist, after removing dangling links of the same
 * shape. Returns the link. Throws when the path is taken: by something that is not a link, or by the link of another
 * node that exists (a hash collision: never repointed under a running node).
 */
export function makePodsLink(nodeDataDir: string): string {
  removeDanglingLinks();
  const link = podsLinkPath(nodeDataDir);
  const target = join(resolve(nodeDataDir), "pods");
  const current = linkTarget(link);
  if (current === target) return link;
  if (current !== undefined)
    throw new Error(`cannot link the kubelet's pods directory at ${link}: it links another node's (${current})`);
  symlinkSync(target, link, "dir");
  return link;
}

/** Removes `nodeDataDir`'s link when it still points at its pods directory. */
export function removePodsLink(nodeDataDir: string): void {
  const link = podsLinkPath(nodeDataDir);
  if (linkTarget(link) === join(resolve(nodeDataDir), "pods")) rmSync(link, { force: true });
}

/** The target of the symlink at `path`; undefined when there is none; throws when `path` is something else. */
function linkTarget(path: string): string | undefined {
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(path);
  } catch {
    return undefined;
  }
  if (!st.isSymbolicLink()) throw new Error(`cannot link the kubelet's pods directory at ${path}: the path is taken`);
  return readlinkSync(path);
}

/** Removes `/tmp/kvtxxxxx` links whose target is gone (never anything that is not such a link). */
function removeDanglingLinks(): void {
  let names: string[];
  try {
    names = readdirSync(LINK_DIR);
  } catch {
    return;
  }
  for (const name of names) {
    if (!LINK_NAME.test(name)) continue;
    const path = join(LINK_DIR, name);
    try {
      if (!lstatSync(path).isSymbolicLink()) continue;
    } catch {
      continue;
    }
    try {
      statSync(path);
    } catch {
      rmSync(path, { force: true }); // dangling: its node's data dir was removed
    }
  }
}
