/**
 * Static bearer tokens from a file, as kube-apiserver's `--token-auth-file`: one CSV line per token,
 *
 *   token,user,uid[,"group1,group2,..."]
 *
 * (blank lines and lines starting with # are skipped). The local cluster gives the scheduler and each kubelet
 * their own identity this way (`system:kube-scheduler`; `system:node:<name>` in `system:nodes`).
 */
import { readFileSync } from "node:fs";

/** One line of a token file. */
export interface StaticToken {
  readonly token: string;
  readonly username: string;
  readonly uid: string;
  readonly groups: readonly string[];
}

function csvFields(line: string): string[] {
  const out: string[] = [];
  let cur = "";
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quoted) {
      if (c === '"' && line[i + 1] === '"') {
        cur += '"';
        i++;
      } else if (c === '"') quoted = false;
      else cur += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") {
      out.push(cur);
      cur = "";
    } else cur += c;
  }
  if (quoted) throw new Error("unterminated quoted field");
  out.push(cur);
  return out;
}

/** Parses a token file's text; throws naming the line on a malformed one (kube-apiserver refuses to start too). */
export function parseTokenFile(text: string, file = "token file"): StaticToken[] {
  const out: StaticToken[] = [];
  text.split("\n").forEach((raw, i) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    let f: string[];
    try {
      f = csvFields(line);
    } catch (err) {
      throw new Error(`${file}, line ${i + 1}: ${(err as Error).message}`, { cause: err });
    }
    if (f.length < 3 || f[0] === "" || f[1] === "")
      throw new Error(`${file}, line ${i + 1}: want token,user,uid[,"groups"], got ${f.length} fields`);
    const groups = (f[3] ?? "")
      .split(",")
      .map((g) => g.trim())
      .filter((g) => g !== "");
    out.push({ token: f[0], username: f[1], uid: f[2], groups });
  });
  return out;
}

/** Reads and parses `file`. */
export function readTokenFile(file: string): StaticToken[] {
  return parseTokenFile(readFileSync(file, "utf8"), file);
}

/** Renders tokens as a token file (the groups field quoted). */
export function renderTokenFile(tokens: readonly StaticToken[]): string {
  return tokens.map((t) => `${t.token},${t.username},${t.uid},"${t.groups.join(",")}"\n`).join("");
}
