import type { ServerResponse } from "node:http";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { builtinResources } from "../resources/builtins.ts";
import { parseFieldSelector } from "../selectors/fields.ts";
import { parseLabelSelector } from "../selectors/labels.ts";
import { Store } from "../storage/store.ts";
import type { KubeObject } from "../types.ts";
import { WatchHub } from "./hub.ts";
import { serveWatch } from "./stream.ts";

const logger = pino({ level: "silent" });

/** The parts of a ServerResponse a watch uses, recording what reached the socket (written while not corked). */
function fakeResponse() {
  const sent: string[] = [];
  let corks = 0;
  let held: string[] = [];
  const res = {
    writableEnded: false,
    writableLength: 0,
    writeHead: () => res,
    flushHeaders: () => undefined,
    cork: () => void corks++,
    uncork: () => {
      corks--;
      if (corks === 0) {
        sent.push(...held);
        held = [];
      }
    },
    write: (chunk: string | Buffer) => {
      if (corks > 0) held.push(String(chunk));
      else sent.push(String(chunk));
      return true;
    },
    on: () => res,
    end: () => {
      res.writableEnded = true;
    },
    destroy: () => undefined,
  };
  return { res: res as unknown as ServerResponse, sent };
}

describe("serveWatch", () => {
  it("sends a commit's events before the writer's await of that commit resumes (ahead of its response)", async () => {
    const store = Store.open({ logger });
    const hub = new WatchHub(store);
    const def = builtinResources().find((d) => d.resource === "configmaps")!;
    const { res, sent } = fakeResponse();
    serveWatch(res, hub, {
      def,
      version: "v1",
      filter: {
        coll: "core/configmaps",
        idPrefix: "",
        labels: parseLabelSelector(undefined),
        fields: parseFieldSelector(undefined, new Set()),
        getters: new Map(),
      },
      fromRev: undefined,
      startRev: store.revision,
      table: false,
      include: "Object",
      bookmarks: false,
      timeoutSeconds: 60,
      logger,
    });
    const cm: KubeObject = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x", namespace: "a" } };
    await store.put("core/configmaps", "a/x", cm).committed;
    // What a request handler does next is answer the write: the event must already be out.
    expect(sent.map((l) => JSON.parse(l) as { type: string })).toMatchObject([{ type: "ADDED" }]);
  });
});
