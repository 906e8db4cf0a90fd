/**
 * The trace file exporter (`KUBEVIRT_TRACES_FILE`, the local cluster's `npm start -- --traces FILE`): each batch is
 * appended to the file as one OTLP/JSON line. Writes are asynchronous (one `write` per batch on a file opened with
 * O_APPEND, so several processes may share the file and lines never interleave), queued in order, and `shutdown`
 * waits for the queue. Only type imports from the SDK, so importing this module costs nothing when tracing is off.
 */
import type { FileHandle } from "node:fs/promises";
import type { ExportResult, ExportResultCode } from "@opentelemetry/core";
import type { SpanExporter } from "@opentelemetry/sdk-trace";
import { type ExportableSpan, toOtlpRequest } from "./otlp-json.ts";

// @opentelemetry/core's ExportResultCode values (core itself is loaded only with the SDK).
const SUCCESS = 0 as ExportResultCode;
const FAILED = 1 as ExportResultCode;

/** A SpanExporter that appends each batch to a file as one OTLP/JSON line, without blocking the event loop. */
export class FileSpanExporter implements SpanExporter {
  readonly #path: string;
  #file: Promise<FileHandle> | undefined;
  /** The last queued write: batches reach the file in export order. */
  #tail: Promise<void> = Promise.resolve();
  #stopped = false;

  constructor(path: string) {
    this.#path = path;
  }

  export(spans: ExportableSpan[], done: (result: ExportResult) => void): void {
    if (this.#stopped) {
      done({ code: FAILED, error: new Error("the trace file exporter is shut down") });
      return;
    }
    const line = Buffer.from(`${JSON.stringify(toOtlpRequest(spans))}\n`);
    this.#tail = this.#tail.then(async () => {
      try {
        // node:fs/promises (and the stream and readline modules it loads) only in processes that export spans.
        this.#file ??= import("node:fs/promises").then((fs) => fs.open(this.#path, "a"));
        await (await this.#file).write(line);
        done({ code: SUCCESS });
      } catch (error) {
        done({ code: FAILED, error: error as Error });
      }
    });
  }

  /** Resolves when every batch handed to {@link export} so far is in the file. */
  forceFlush(): Promise<void> {
    return this.#tail;
  }

  async shutdown(): Promise<void> {
    this.#stopped = true;
    await this.#tail;
    const file = this.#file;
    this.#file = undefined;
    if (file) await (await file.catch(() => undefined))?.close();
  }
}
