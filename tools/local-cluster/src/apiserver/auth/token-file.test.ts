import { describe, expect, it } from "vitest";
import { parseTokenFile, renderTokenFile } from "./token-file.ts";

describe("token file (--token-auth-file)", () => {
  it("parses kube-apiserver's CSV lines, groups quoted, comments and blank lines skipped", () => {
    const text = '# comment\n\nt1,system:kube-scheduler,uid1\nt2,system:node:n1,uid2,"system:nodes,extra"\n';
    expect(parseTokenFile(text)).toEqual([
      { token: "t1", username: "system:kube-scheduler", uid: "uid1", groups: [] },
      { token: "t2", username: "system:node:n1", uid: "uid2", groups: ["system:nodes", "extra"] },
    ]);
  });

  it("round-trips what it renders", () => {
    const tokens = [{ token: "a", username: "u", uid: "u", groups: ["g1", "g2"] }];
    expect(parseTokenFile(renderTokenFile(tokens))).toEqual(tokens);
  });

  it.each([
    ["only two fields", "tok,user\n", "line 1: want token,user,uid"],
    ["an empty user", "\ntok,,uid\n", "line 2: want token,user,uid"],
    ["an unterminated quote", 'tok,user,uid,"g1\n', "line 1: unterminated quoted field"],
  ])("refuses %s, naming the line", (_what, text, message) => {
    expect(() => parseTokenFile(text, "f.csv")).toThrow(`f.csv, ${message}`);
  });
});
