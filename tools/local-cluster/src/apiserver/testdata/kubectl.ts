/** Test support: runs the machine's real kubectl against a server, with a fresh HOME (discovery cache) per suite. */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** One kubectl run. */
export interface KubectlResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** A kubectl bound to one kubeconfig. */
export interface Kubectl {
  run(args: string[], stdin?: string): Promise<KubectlResult>;
  /** Writes a manifest file and returns its path. */
  file(name: string, text: string): string;
  cleanup(): void;
}

/** A kubectl with its own HOME and cache. */
export function kubectl(kubeconfigPath: string, binary = process.env.KUBECTL ?? "kubectl"): Kubectl {
  const home = mkdtempSync(join(tmpdir(), "kvt-kubectl-"));
  return {
    run(args, stdin) {
      return new Promise((resolve) => {
        const child = execFile(
          binary,
          args,
          {
            env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, KUBECONFIG: kubeconfigPath },
            timeout: 60_000,
          },
          (err, stdout, stderr) => {
            const code = err ? (typeof err.code === "number" ? err.code : 1) : 0;
            resolve({ code, stdout, stderr });
          },
        );
        if (stdin !== undefined) child.stdin?.end(stdin);
      });
    },
    file(name, text) {
      const p = join(home, name);
      writeFileSync(p, text);
      return p;
    },
    cleanup() {
      rmSync(home, { recursive: true, force: true });
    },
  };
}
