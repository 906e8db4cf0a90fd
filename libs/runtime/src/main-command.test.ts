import { describe, expect, it, vi } from "vitest";
import { helpText, type MainCommand, runMainCommand } from "./main-command.ts";

function command(run: MainCommand<{ port: { type: "string" } }>["run"]): MainCommand<{ port: { type: "string" } }> {
  return {
    name: "demo",
    version: "1.2.3",
    summary: "does demo things",
    usage: "[--port N]",
    flags: { port: { type: "string" } },
    run,
  };
}

describe("runMainCommand()", () => {
  it("prints help with version and usage and returns 0 for --help", async () => {
    const write = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    const run = vi.fn(async () => 0);
    expect(await runMainCommand(command(run), ["--help"])).toBe(0);
    expect(write.mock.calls[0][0]).toContain("demo 1.2.3: does demo things\nUsage: demo [--port N]");
    expect(run).not.toHaveBeenCalled();
    write.mockRestore();
  });

  it("returns 2 and the usage for an unknown flag", async () => {
    const write = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    expect(
      await runMainCommand(
        command(async () => 0),
        ["--bogus"],
      ),
    ).toBe(2);
    expect(String(write.mock.calls[0][0])).toMatch(/Unknown option '--bogus'[\s\S]*Usage: demo/);
    write.mockRestore();
  });

  it("passes flags and positionals to run() and returns its code", async () => {
    const run = vi.fn(async (_input: unknown) => 7);
    expect(await runMainCommand(command(run), ["--port", "8443", "extra"])).toBe(7);
    expect(run.mock.calls[0][0]).toMatchObject({ values: { port: "8443" }, positionals: ["extra"] });
  });

  it("helpText() lists the standard flags", () => {
    expect(helpText(command(async () => 0))).toContain("--version");
  });
});
