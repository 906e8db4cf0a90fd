/**
 * native/'s Makefiles compile every C++ source on its own through ccache (cc.mk), so a fresh clone reuses the objects
 * a previous clone compiled (CI clones afresh each run). ccache cannot cache a command that compiles several sources,
 * so a rule that goes back to one compile-and-link command would silently make every CI compile again: this reads
 * what each Makefile would run (`make -n -B`, nothing is built) and checks every compile of a .cc file.
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const root = new URL("..", import.meta.url).pathname;

/** The compiler commands `make -n -B` prints for `targets` of the Makefile in `dir`, with CCACHE set to a marker. */
function compileCommands(dir: string, targets: string[]): string[] {
  const out = execFileSync("make", ["-n", "-B", "-C", join(root, dir), ...targets, "CCACHE=CCACHE-MARK"], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
  return out.split("\n").filter((line) => /\.cc\b/.test(line) && /\b(g\+\+|c\+\+|clang\+\+)\b/.test(line));
}

describe("native/ C++ builds", () => {
  for (const [dir, targets] of [
    [".", ["all", "build/test/unit_tests"]],
    ["test/migration", ["all", "bench", "disk-bench"]],
    ["fuzz", ["all"]],
  ] as const) {
    it(`compile each source on its own through ccache (${dir} ${targets.join(" ")})`, () => {
      const commands = compileCommands(dir, [...targets]);
      expect(commands.length).toBeGreaterThan(3);
      for (const command of commands) {
        const sources = command.split(/\s+/).filter((w) => w.endsWith(".cc"));
        expect({
          command,
          sources: sources.length,
          viaCcache: command.startsWith("CCACHE-MARK "),
          compileOnly: / -c /.test(command),
        }).toEqual({
          command,
          sources: 1,
          viaCcache: true,
          compileOnly: true,
        });
      }
    });
  }
});
