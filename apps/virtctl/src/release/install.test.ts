// biome-ignore-all lint/suspicious/noTemplateCurlyInString: shell script text, where ${...} is the shell's
/**
 * virtctl as users install it: build the package, `npm install -g` it into a temporary prefix, and run the installed
 * `virtctl` and `kubectl-virt` from a directory outside the repository, with a PATH that has no node_modules/.bin
 * (so the machine's own Node runs them, as it would for a user, and no package of this repository is reachable).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildPackage, MIN_NODE_MAJOR } from "./build-package.ts";

/** PATH without the project's node_modules/.bin entries; the Node of the machine if it has one, else ours. */
function userPath(prefixBin: string): string {
  const entries = (process.env.PATH ?? "").split(delimiter).filter((p) => p !== "" && !p.includes("node_modules"));
  const hasNode = entries.some((p) => existsSync(join(p, "node")));
  return [prefixBin, ...entries, ...(hasNode ? [] : [dirname(process.execPath)])].join(delimiter);
}

let root = "";
let env: NodeJS.ProcessEnv = {};
let home = "";

function run(program: string, args: readonly string[]): { status: number | null; stdout: string; stderr: string } {
  return spawnSync(program, args, { cwd: home, env, encoding: "utf8", timeout: 20_000 });
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), "virtctl-install-"));
  home = join(root, "home");
  mkdirSync(home);
  const built = await buildPackage(join(root, "build"));
  const prefix = join(root, "prefix");
  env = { PATH: userPath(join(prefix, "bin")), HOME: home, npm_config_cache: join(root, "npm-cache") };
  execFileSync(
    "npm",
    ["install", "-g", "--prefix", prefix, "--offline", "--no-audit", "--no-fund", "--loglevel=error", built.tarball],
    { cwd: home, env, stdio: ["ignore", "pipe", "pipe"] },
  );
}, 60_000);
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("the installed virtctl package", () => {
  it(`runs on the machine's Node (>= ${MIN_NODE_MAJOR})`, () => {
    const node = run("node", ["--version"]);
    expect(Number(/^v(\d+)/.exec(node.stdout)?.[1])).toBeGreaterThanOrEqual(MIN_NODE_MAJOR);
    const out = run("virtctl", ["version", "--client"]);
    expect(out.stderr).toBe("");
    expect(out.stdout).toContain(`GoVersion:"node ${node.stdout.trim().slice(1)}"`);
    expect(out.status).toBe(0);
  });

  it("kubectl-virt version --client prints the client version", () => {
    const out = run("kubectl-virt", ["version", "--client"]);
    expect(out.stdout).toMatch(/^Client Version: version\.Info\{GitVersion:"v\d+\.\d+\.\d+"/);
    expect(out.status).toBe(0);
  });

  it("kubectl finds the plugin: kubectl virt version --client", () => {
    // kubectl is part of a user's set-up, not of this repository; without it the plugin is still checked above.
    if (spawnSync("kubectl", ["version", "--client"], { env }).error) return;
    const out = run("kubectl", ["virt", "version", "--client"]);
    expect(out.stdout).toContain("Client Version: version.Info{");
    expect(out.status).toBe(0);
  });

  it("kubectl completes the plugin through kubectl_complete-virt", () => {
    if (spawnSync("kubectl", ["version", "--client"], { env }).error) return;
    const out = run("kubectl", ["__complete", "virt", "-n", "ns", "mig"]);
    expect(out.stdout).toMatch(/^migrate\t.*\nmigrate-cancel\t.*\n:4\n/);
    expect(out.status).toBe(0);
  });

  it("virtctl completion bash works from the install", () => {
    const script =
      "source <(virtctl completion bash); complete -p kubectl-virt; COMP_WORDS=(virtctl sta); COMP_CWORD=1; _virtctl; echo ${COMPREPLY[@]}";
    const out = run("bash", ["-c", script]);
    expect(out.stdout).toBe("complete -F _virtctl kubectl-virt\nstart\n");
    expect(out.status).toBe(0);
  });

  it("virtctl --help lists the commands", () => {
    const out = run("virtctl", ["--help"]);
    expect(out.stdout).toMatch(/^ {2}completion +/m);
    expect(out.status).toBe(0);
  });
});
