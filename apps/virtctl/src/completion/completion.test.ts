import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { COMMANDS } from "../commands/index.ts";
import { bashCompletion } from "./bash-completion.ts";
import { completionModel } from "./completion-model.ts";
import { completeArgs, Directive } from "./dynamic-completion.ts";
import { fishCompletion } from "./fish-completion.ts";
import { zshCompletion } from "./zsh-completion.ts";

const mainPath = new URL("../main.ts", import.meta.url).pathname;
const model = completionModel(COMMANDS);
const has = (shell: string): boolean => spawnSync(shell, ["-c", "exit 0"]).status === 0;

let dir = "";
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "virtctl-completion-"));
  writeFileSync(join(dir, "virtctl.bash"), bashCompletion(model));
  writeFileSync(join(dir, "virtctl.zsh"), zshCompletion(model));
  writeFileSync(join(dir, "virtctl.fish"), fishCompletion(model));
  writeFileSync(join(dir, "kubeconfig-a"), "");
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the bash function for the words typed so far (the last one is the partial word) and returns COMPREPLY. */
function bashComplete(words: readonly string[]): string[] {
  const quoted = words.map((w) => `'${w}'`).join(" ");
  const script = `source ./virtctl.bash; COMP_WORDS=(${quoted}); COMP_CWORD=${words.length - 1}; _virtctl; printf '%s\\n' "\${COMPREPLY[@]}"`;
  const out = execFileSync("bash", ["-c", script], { cwd: dir, encoding: "utf8" });
  return out.split("\n").filter((l) => l !== "");
}

describe("virtctl completion", () => {
  it("main prints each shell's script and refuses another shell", () => {
    for (const shell of ["bash", "zsh", "fish"]) {
      const out = execFileSync(process.execPath, [mainPath, "completion", shell], { encoding: "utf8" });
      expect(out).toContain("virtctl");
    }
    const bad = spawnSync(process.execPath, [mainPath, "completion", "tcsh"], { encoding: "utf8" });
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain('unsupported shell "tcsh": use one of bash, zsh, fish');
  });

  it("bash: sourcing the script registers virtctl and kubectl-virt", () => {
    const script = `source <(${JSON.stringify(process.execPath)} ${JSON.stringify(mainPath)} completion bash); complete -p virtctl kubectl-virt`;
    const out = execFileSync("bash", ["-c", script], { encoding: "utf8" });
    expect(out).toBe("complete -F _virtctl virtctl\ncomplete -F _virtctl kubectl-virt\n");
  });

  it.each([
    [["virtctl", "sta"], ["start"]],
    [
      ["virtctl", "-n", "ns", "mig"],
      ["migrate", "migrate-cancel"],
    ],
    [["virtctl", "--kubeconfig", "x", "so"], ["soft-reboot"]],
    [["virtctl", "start", "--pa"], ["--paused"]],
    [["virtctl", "version", "--cl"], ["--client"]],
    [["virtctl", "stop", "vm1", "--cont"], ["--context"]],
    [
      ["virtctl", "pause", ""],
      ["vm", "vmi"],
    ],
    [["virtctl", "pause", "vm", ""], []],
    [["virtctl", "completion", "z"], ["zsh"]],
    [["virtctl", "expose", "vm", "x", "--type", "N"], ["NodePort"]],
    [["virtctl", "stop", "--grace-period", ""], []],
    [["virtctl", "--kubeconfig", "kubeconfig-"], ["kubeconfig-a"]],
  ])("bash: %j completes to %j", (words, expected) => {
    expect(bashComplete(words)).toEqual(expected);
  });

  it("bash: every command is offered with its own flags only", () => {
    expect(bashComplete(["virtctl", ""])).toEqual(COMMANDS.map((c) => c.name));
    expect(bashComplete(["virtctl", "start", "--"])).not.toContain("--grace-period");
    expect(bashComplete(["virtctl", "stop", "--"])).toContain("--grace-period");
  });

  it.runIf(has("fish"))("fish: subcommands, flags and flag values", () => {
    const complete = (line: string): string[] =>
      execFileSync("fish", ["-c", `source ./virtctl.fish; complete -C ${JSON.stringify(line)}`], {
        cwd: dir,
        encoding: "utf8",
      })
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => l.split("\t")[0] ?? "");
    expect(complete("virtctl -n ns mig")).toEqual(["migrate", "migrate-cancel"]);
    expect(complete("kubectl-virt start --pa")).toEqual(["--paused"]);
    expect(complete("virtctl pause ")).toEqual(["vm", "vmi"]);
    expect(complete("virtctl expose vm x --type ")).toEqual(["ClusterIP", "LoadBalancer", "NodePort"]);
  });

  it.runIf(has("zsh"))("zsh: the script parses and registers _virtctl for both programs", () => {
    execFileSync("zsh", ["-n", "virtctl.zsh"], { cwd: dir });
    const script =
      "autoload -U compinit; compinit -u -D; source ./virtctl.zsh; print -r -- $_comps[virtctl] $_comps[kubectl-virt]";
    const out = execFileSync("zsh", ["-f", "-c", script], {
      cwd: dir,
      encoding: "utf8",
      env: { ...process.env, HOME: dir },
    });
    expect(out.trim()).toBe("_virtctl _virtctl");
  });

  it("zsh and fish scripts list every command with its help line", () => {
    const zsh = zshCompletion(model);
    const fish = fishCompletion(model);
    for (const c of model.commands) {
      expect(zsh).toContain(`'${c.name}:`);
      expect(fish).toContain(`-a '${c.name}'`);
    }
  });
});

describe("kubectl plugin completion (cobra's __complete protocol)", () => {
  const words = (args: string[]): string[] =>
    [...completeArgs(model, args).candidates].map((c) => c.split("\t")[0] ?? "");

  it.each([
    [["sta"], ["start"]],
    [
      ["-n", "ns", "mig"],
      ["migrate", "migrate-cancel"],
    ],
    [["start", "--pa"], ["--paused"]],
    [
      ["pause", ""],
      ["vm", "vmi"],
    ],
    [["pause", "vm", ""], []],
    [["expose", "vm", "x", "--type", "N"], ["NodePort"]],
    [["stop", "--grace-period", ""], []],
  ])("%j offers %j and no files", (args, expected) => {
    expect(words(args)).toEqual(expected);
    expect(completeArgs(model, args).directive).toBe(Directive.NoFileComp);
  });

  it("--kubeconfig leaves the value to the shell's file completion", () => {
    expect(completeArgs(model, ["--kubeconfig", ""])).toEqual({ candidates: [], directive: Directive.Default });
  });

  it("virtctl __complete prints candidates with their help, then the directive", () => {
    const out = execFileSync(process.execPath, [mainPath, "__complete", "soft"], { encoding: "utf8" });
    expect(out).toBe("soft-reboot\tSoft reboot a virtual machine instance\n:4\n");
  });
});
