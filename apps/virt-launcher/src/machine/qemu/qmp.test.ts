import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger } from "@kvt/observability";
import { describe, expect, it } from "vitest";
import { QmpClient, QmpError, type QmpEvent } from "./qmp.ts";

const logger = createLogger({ component: "qmp-test", level: "silent" });

describe("QmpClient", () => {
  it("negotiates, correlates replies by id, surfaces errors and events, and survives garbage lines", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-qmp-"));
    const path = join(dir, "qmp.sock");
    const server = createServer((s: Socket) => {
      s.write('{"QMP": {"version": {}, "capabilities": []}}\n');
      let buf = "";
      s.on("data", (c: Buffer) => {
        buf += c.toString();
        for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
          const msg = JSON.parse(buf.slice(0, nl)) as { execute: string; id: number };
          buf = buf.slice(nl + 1);
          if (msg.execute === "qmp_capabilities") s.write(`{"return": {}, "id": ${msg.id}}\n`);
          else if (msg.execute === "query-status")
            s.write(
              `this is not json\n{"event": "STOP", "data": {}}\n{"return": {"status": "paused"}, "id": ${msg.id}}\n`,
            );
          else s.write(`{"error": {"class": "CommandNotFound", "desc": "no such command"}, "id": ${msg.id}}\n`);
        }
      });
    });
    await new Promise<void>((r) => server.listen(path, () => r()));
    try {
      const qmp = await QmpClient.connect(path, logger);
      const events: QmpEvent[] = [];
      qmp.on("event", (e) => events.push(e));
      await expect(qmp.execute("query-status")).resolves.toEqual({ status: "paused" });
      expect(events.map((e) => e.event)).toEqual(["STOP"]);
      await expect(qmp.execute("nope")).rejects.toBeInstanceOf(QmpError);
      qmp.close();
      await expect(qmp.execute("query-status")).rejects.toThrow(/closed/);
    } finally {
      server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
