/**
 * A component's TLS material kept current without a restart, from where KubeVirt's components take it:
 *
 *   certificate + key   files (a Secret volume: kubevirt-virt-handler-server-certs, kubevirt-virt-handler-certs,
 *                       ...), re-read every 2 s ({@link watchFiles})
 *   CA bundle           a {@link CaBundleSource}: ConfigMap kubevirt-ca followed through a watch (libs/kube
 *                       watchConfigMapKey, KubeVirt's way: a rotated CA is trusted as soon as it is written), or a
 *                       file ({@link fileCaBundle})
 *
 * A certificate read with the other one's key (a volume caught mid-swap) is not handed on; the complete pair is,
 * at the next read. What the consumer refuses (it throws) is reported and tried again with the next change.
 */
import { readFileSync } from "node:fs";
import { watchFiles } from "./cert-files.ts";
import { keyMatchesCertificate } from "./rotation.ts";

/** PEM certificate, its key, and the CA bundle to trust peers by. */
export interface TlsMaterial {
  readonly cert: string;
  readonly key: string;
  readonly ca: string;
}

/** Where a CA bundle comes from (libs/kube's `watchConfigMapKey` result is one). */
export interface CaBundleSource {
  /** The bundle, once there is one. */
  firstValue(): Promise<string>;
  /** Each later bundle. */
  subscribe(listener: (bundle: string) => void): void;
  stop(): void;
}

/** A CA bundle from a file, re-read every 2 s. */
export function fileCaBundle(path: string): CaBundleSource {
  const listeners: ((bundle: string) => void)[] = [];
  const watch = watchFiles([path], ([bundle = ""]) => {
    for (const l of listeners) l(bundle);
  });
  return {
    firstValue: () => Promise.resolve(readFileSync(path, "utf8")),
    subscribe: (listener) => {
      listeners.push(listener);
    },
    stop: () => watch.stop(),
  };
}

/** What {@link watchTlsMaterial} reads. */
export interface TlsMaterialOptions {
  readonly certFile: string;
  readonly keyFile: string;
  readonly ca: CaBundleSource;
  /** Told when the consumer refused new material (it is kept for the next change). */
  readonly onRefused?: (error: unknown) => void;
  /** Gives up waiting for the first CA bundle (the process is stopping). */
  readonly signal?: AbortSignal;
}

/** The first material, and the changes after it. */
export interface TlsMaterialWatch {
  readonly initial: TlsMaterial;
  /** Calls `apply` with each new complete material; `apply` throws to refuse one. */
  follow(apply: (material: TlsMaterial) => void): void;
  stop(): void;
}

/** Rejects when `signal` aborts (never without one). */
function aborted(signal: AbortSignal | undefined): Promise<never> {
  return new Promise((_resolve, reject) => {
    signal?.addEventListener("abort", () => reject(new Error("stopped while waiting for the CA bundle")), {
      once: true,
    });
  });
}

/** Reads the material (waiting for the first CA bundle) and follows its changes until stopped. */
export async function watchTlsMaterial(o: TlsMaterialOptions): Promise<TlsMaterialWatch> {
  let apply: ((m: TlsMaterial) => void) | undefined;
  let current: TlsMaterial | undefined;
  let pending: TlsMaterial | undefined;
  const update = (next: Partial<TlsMaterial>): void => {
    if (!current) return;
    const wanted: TlsMaterial = { ...(pending ?? current), ...next };
    pending = wanted;
    // A pair caught mid-swap waits; a new CA bundle does not wait for it.
    const usable = keyMatchesCertificate(wanted.cert, wanted.key) ? wanted : { ...current, ca: wanted.ca };
    if (usable.cert === current.cert && usable.key === current.key && usable.ca === current.ca) return;
    try {
      apply?.(usable);
      current = usable;
      if (usable === wanted) pending = undefined;
    } catch (error) {
      o.onRefused?.(error);
    }
  };
  o.ca.subscribe((ca) => update({ ca }));
  let ca: string;
  try {
    ca = await Promise.race([o.ca.firstValue(), aborted(o.signal)]);
  } catch (error) {
    o.ca.stop();
    throw error;
  }
  current = { cert: readFileSync(o.certFile, "utf8"), key: readFileSync(o.keyFile, "utf8"), ca };
  const pair = watchFiles([o.certFile, o.keyFile], ([cert = "", key = ""]) => update({ cert, key }));
  return {
    initial: current,
    follow: (fn) => {
      apply = fn;
    },
    stop: () => {
      pair.stop();
      o.ca.stop();
    },
  };
}
