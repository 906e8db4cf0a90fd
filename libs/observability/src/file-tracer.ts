/**
 * The tracer provider of a process whose spans go only to the trace file (`KUBEVIRT_TRACES_FILE`, the local cluster's
 * `--traces FILE`): spans as plain objects, batched and appended by {@link FileSpanExporter}, without the
 * OpenTelemetry SDK. Importing sdk-trace and resources from source costs a process 70-90 ms of CPU; in the bundled,
 * compile-cached virt-launcher image it measured about 4 ms of its JavaScript thread (74 -> 78 ms up to a Running VM),
 * paid on the VM start path and once more per migration target. What the file needs is small: ids, parent, name,
 * kind, times, attributes, events, status.
 *
 * Behaves as the SDK with its defaults: parent-based sampling that samples every root (an unsampled parent gives a
 * non-recording child), a span ended twice or changed after its end keeps what it had, an `OK` status is final,
 * `undefined` attribute values are dropped, times accept the API's `TimeInput` (performance-relative or epoch
 * milliseconds, `Date`, `HrTime`). Batching follows the SDK's BatchSpanProcessor: a batch leaves 1 s after its first
 * span (or when 512 are waiting), at most 2048 wait (more are dropped), and shutdown writes the rest. Links are
 * accepted but not recorded (the file format has none).
 */
import {
  type Attributes,
  type Context,
  context,
  type Exception,
  type HrTime,
  isSpanContextValid,
  type Link,
  type Span,
  type SpanAttributes,
  type SpanContext,
  SpanKind,
  type SpanOptions,
  type SpanStatus,
  SpanStatusCode,
  type TimeInput,
  TraceFlags,
  type Tracer,
  type TracerProvider,
  trace,
} from "@opentelemetry/api";
import { FileSpanExporter } from "./file-span-exporter.ts";
import type { ExportableSpan } from "./otlp-json.ts";

/** How long a batch waits for more spans (ms). */
const EXPORT_DELAY_MS = 1_000;
/** Spans per batch: a full batch leaves at once. */
const MAX_BATCH = 512;
/** Spans waiting at most; later ones are dropped until the next batch leaves. */
const MAX_QUEUE = 2_048;

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

/** `bytes` random bytes in hex, never all zero (an invalid id). */
function randomId(bytes: number): string {
  for (;;) {
    let id = "";
    for (let i = 0; i < bytes; i++) id += HEX[(Math.random() * 256) | 0];
    if (!/^0+$/.test(id)) return id;
  }
}

const TIME_ORIGIN = performance.timeOrigin;

function fromMillis(epochMs: number): HrTime {
  let seconds = Math.floor(epochMs / 1000);
  let nanos = Math.round((epochMs - seconds * 1000) * 1e6);
  if (nanos >= 1e9) {
    seconds += 1;
    nanos -= 1e9;
  }
  return [seconds, nanos];
}

function isTimeInput(x: unknown): x is TimeInput {
  return typeof x === "number" || x instanceof Date || (Array.isArray(x) && x.length === 2);
}

/** A `TimeInput` as `HrTime` (the SDK's reading: a number below the time origin is relative to it). */
function hrTime(t: TimeInput | undefined): HrTime {
  if (t === undefined) return fromMillis(TIME_ORIGIN + performance.now());
  if (Array.isArray(t)) return t;
  if (t instanceof Date) return fromMillis(t.getTime());
  return fromMillis(t < TIME_ORIGIN ? TIME_ORIGIN + t : t);
}

const before = (a: HrTime, b: HrTime): boolean => a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);

/** Where ended spans go. */
interface SpanSink {
  onEnd(span: FileSpan): void;
}

/** One recorded span, in the shape the OTLP/JSON encoder reads. */
class FileSpan implements Span, ExportableSpan {
  name: string;
  readonly parentSpanContext: SpanContext | undefined;
  readonly resource: ExportableSpan["resource"];
  readonly instrumentationScope: ExportableSpan["instrumentationScope"];
  readonly kind: SpanKind;
  readonly startTime: HrTime;
  endTime: HrTime = [0, 0];
  readonly attributes: Attributes = {};
  readonly events: { name: string; time: HrTime; attributes?: Attributes }[] = [];
  status: SpanStatus = { code: SpanStatusCode.UNSET };
  readonly #context: SpanContext;
  readonly #sink: SpanSink;
  #ended = false;

  constructor(
    name: string,
    spanContext: SpanContext,
    parentSpanContext: SpanContext | undefined,
    options: SpanOptions,
    resource: ExportableSpan["resource"],
    instrumentationScope: ExportableSpan["instrumentationScope"],
    sink: SpanSink,
  ) {
    this.name = name;
    this.parentSpanContext = parentSpanContext;
    this.resource = resource;
    this.instrumentationScope = instrumentationScope;
    this.#context = spanContext;
    this.#sink = sink;
    this.kind = options.kind ?? SpanKind.INTERNAL;
    this.startTime = hrTime(options.startTime);
    if (options.attributes) this.setAttributes(options.attributes);
  }

  spanContext(): SpanContext {
    return this.#context;
  }

  setAttribute(key: string, value: SpanAttributes[string]): this {
    if (!this.#ended && value !== undefined && value !== null) this.attributes[key] = value;
    return this;
  }

  setAttributes(attributes: SpanAttributes): this {
    for (const key in attributes) this.setAttribute(key, attributes[key]);
    return this;
  }

  addEvent(name: string, attributesOrTime?: SpanAttributes | TimeInput, time?: TimeInput): this {
    if (this.#ended) return this;
    if (isTimeInput(attributesOrTime)) {
      this.events.push({ name, time: hrTime(attributesOrTime) });
    } else {
      const attributes: Attributes = {};
      for (const key in attributesOrTime ?? {}) {
        const v = attributesOrTime?.[key];
        if (v !== undefined && v !== null) attributes[key] = v;
      }
      this.events.push({ name, time: hrTime(time), attributes });
    }
    return this;
  }

  addLink(_link: Link): this {
    return this;
  }

  addLinks(_links: Link[]): this {
    return this;
  }

  setStatus(status: SpanStatus): this {
    if (this.#ended || status.code === SpanStatusCode.UNSET || this.status.code === SpanStatusCode.OK) return this;
    this.status =
      status.code === SpanStatusCode.ERROR && status.message !== undefined
        ? { code: status.code, message: status.message }
        : { code: status.code };
    return this;
  }

  updateName(name: string): this {
    if (!this.#ended) this.name = name;
    return this;
  }

  end(endTime?: TimeInput): void {
    if (this.#ended) return;
    this.#ended = true;
    const end = hrTime(endTime);
    this.endTime = before(end, this.startTime) ? this.startTime : end;
    this.#sink.onEnd(this);
  }

  isRecording(): boolean {
    return !this.#ended;
  }

  recordException(exception: Exception, time?: TimeInput): void {
    const attributes: Attributes = {};
    if (typeof exception === "string") attributes["exception.message"] = exception;
    else {
      const type = exception.name ?? (exception.code === undefined ? undefined : String(exception.code));
      if (type) attributes["exception.type"] = type;
      if (exception.message) attributes["exception.message"] = exception.message;
      if (exception.stack) attributes["exception.stacktrace"] = exception.stack;
    }
    this.addEvent("exception", attributes, time);
  }
}

class FileTracer implements Tracer {
  readonly #scope: ExportableSpan["instrumentationScope"];
  readonly #provider: FileTracerProvider;

  constructor(scope: ExportableSpan["instrumentationScope"], provider: FileTracerProvider) {
    this.#scope = scope;
    this.#provider = provider;
  }

  startSpan(name: string, options: SpanOptions = {}, ctx: Context = context.active()): Span {
    const parent = options.root ? undefined : trace.getSpanContext(ctx);
    const valid = parent !== undefined && isSpanContextValid(parent);
    const spanContext: SpanContext = {
      traceId: valid ? parent.traceId : randomId(16),
      spanId: randomId(8),
      traceFlags: TraceFlags.SAMPLED,
      ...(valid && parent.traceState ? { traceState: parent.traceState } : {}),
    };
    if (valid && (parent.traceFlags & TraceFlags.SAMPLED) === 0) {
      return trace.wrapSpanContext({ ...spanContext, traceFlags: TraceFlags.NONE });
    }
    return this.#provider.record(name, spanContext, valid ? parent : undefined, options, this.#scope);
  }

  startActiveSpan<F extends (span: Span) => unknown>(name: string, fn: F): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(name: string, options: SpanOptions, fn: F): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(
    name: string,
    options: SpanOptions,
    ctx: Context,
    fn: F,
  ): ReturnType<F>;
  startActiveSpan<F extends (span: Span) => unknown>(
    name: string,
    a: SpanOptions | F,
    b?: Context | F,
    c?: F,
  ): ReturnType<F> {
    const fn = (c ?? (typeof b === "function" ? b : a)) as F;
    const options = typeof a === "function" ? {} : a;
    const parent = typeof b === "object" ? b : context.active();
    const span = this.startSpan(name, options, parent);
    return context.with(trace.setSpan(parent, span), fn as (s: Span) => ReturnType<F>, undefined, span);
  }
}

/**
 * A TracerProvider that appends its spans to `path` as OTLP/JSON lines (see the module comment). Install it with
 * `trace.setGlobalTracerProvider`; `shutdown` writes what is pending.
 */
export class FileTracerProvider implements TracerProvider {
  readonly #resource: ExportableSpan["resource"];
  readonly #exporter: FileSpanExporter;
  readonly #tracers = new Map<string, FileTracer>();
  readonly #sink: SpanSink;
  #queue: FileSpan[] = [];
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;
  /** Spans dropped because MAX_QUEUE were waiting. */
  dropped = 0;

  /** `resourceAttributes`: `service.name` and the like, on every span. */
  constructor(path: string, resourceAttributes: Attributes) {
    this.#resource = { attributes: resourceAttributes };
    this.#exporter = new FileSpanExporter(path);
    this.#sink = { onEnd: (span) => this.#enqueue(span) };
  }

  getTracer(name: string, version?: string): Tracer {
    const key = `${name}@${version ?? ""}`;
    let tracer = this.#tracers.get(key);
    if (!tracer) {
      tracer = new FileTracer({ name, ...(version ? { version } : {}) }, this);
      this.#tracers.set(key, tracer);
    }
    return tracer;
  }

  /** @internal A recording span of this provider (used by its tracers). */
  record(
    name: string,
    spanContext: SpanContext,
    parent: SpanContext | undefined,
    options: SpanOptions,
    scope: ExportableSpan["instrumentationScope"],
  ): Span {
    return new FileSpan(name, spanContext, parent, options, this.#resource, scope, this.#sink);
  }

  /** Writes every ended span to the file; resolves once they are there. */
  async forceFlush(): Promise<void> {
    this.#send();
    await this.#exporter.forceFlush();
  }

  /** Writes what is pending and closes the file; spans ended later are dropped. */
  async shutdown(): Promise<void> {
    if (this.#stopped) return;
    this.#send();
    this.#stopped = true;
    await this.#exporter.shutdown();
  }

  #enqueue(span: FileSpan): void {
    if (this.#stopped) return;
    if (this.#queue.length >= MAX_QUEUE) {
      this.dropped++;
      return;
    }
    this.#queue.push(span);
    if (this.#queue.length >= MAX_BATCH) this.#send();
    else if (!this.#timer) {
      this.#timer = setTimeout(() => this.#send(), EXPORT_DELAY_MS);
      this.#timer.unref?.();
    }
  }

  /** Hands the waiting spans to the exporter (its writes are queued in order). */
  #send(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    while (this.#queue.length > 0) {
      this.#exporter.export(this.#queue.splice(0, MAX_BATCH), () => {});
    }
  }
}
