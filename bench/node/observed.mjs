// Node BullMQ 6.x with and without bullmq-otel 2.x: the Node side of the observability
// suite, driven by `queue-bench` (bench/src/runner/observability.rs). It loads BullMQ 6
// and bullmq-otel 2 from the tests' Node peer (tests/node, workspace bullmq6/), which
// `npm ci` in tests/node installs, and the OpenTelemetry SDK from there too.
//
//   node observed.mjs work <queue> <concurrency> <n> <off|on> <noop|1ms|cpu1ms>
//                                                        -> {"ms", "cpuMs", "spans"}
//
// "on": bullmq-otel's tracer and meter over the OpenTelemetry SDK's batch span
// processor, whose exporter counts the spans and drops them (as the Rust side does): the
// cost inside the process, without a collector's network. No meter provider is
// installed, so bullmq-otel's metrics go to OpenTelemetry's no-op meter. "1ms": the
// handler waits 1 ms (a timer, as an I/O call would) before it returns. "cpu1ms": it
// does 1 ms of CPU work, the Rust probe's very loop (`checksum` in bench/src/probe/mod.rs):
// FNV-1a over a 4 KiB buffer, BENCH_CPU_PASSES passes (the runner sizes them to 1 ms on
// this machine), and checks on every job that it came to BENCH_CPU_CHECKSUM, the value
// the runner computed in Rust. Without them: 80 passes, checksum 0x45a89dc5.
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';

const peer = fileURLToPath(new URL('../../tests/node/', import.meta.url));
const fromPeer = createRequire(`${peer}package.json`);
const load = (name) => import(pathToFileURL(fromPeer.resolve(name)).href);
const { Worker, BullMQOtel, versions } = await import(
  pathToFileURL(`${peer}bullmq6/index.mjs`).href
);

const url = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const connection = { host: url.hostname, port: Number(url.port || 6379), maxRetriesPerRequest: null };
const [command, queueName, concurrencyArg, nArg, mode = 'off', handler = 'noop'] =
  process.argv.slice(2);
const now = () => Number(process.hrtime.bigint() / 1000n);

/** Installs the OpenTelemetry SDK; returns the telemetry for BullMQ and a span count. */
async function otel() {
  const { context, propagation, trace } = await load('@opentelemetry/api');
  const { W3CTraceContextPropagator } = await load('@opentelemetry/core');
  const { AsyncLocalStorageContextManager } = await load('@opentelemetry/context-async-hooks');
  const { AlwaysOnSampler, BasicTracerProvider, BatchSpanProcessor } = await load(
    '@opentelemetry/sdk-trace-base',
  );
  let spans = 0;
  const exporter = {
    export(batch, done) {
      spans += batch.length;
      done({ code: 0 });
    },
    shutdown: async () => {},
    forceFlush: async () => {},
  };
  const provider = new BasicTracerProvider({
    sampler: new AlwaysOnSampler(),
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  const telemetry = new BullMQOtel({ tracerName: 'queue-bench', enableMetrics: true });
  return {
    telemetry,
    finish: async () => {
      await provider.forceFlush();
      await provider.shutdown();
      return spans;
    },
  };
}

const CPU_PASSES = Number(process.env.BENCH_CPU_PASSES ?? 80);
const CPU_CHECKSUM = Number(process.env.BENCH_CPU_CHECKSUM ?? 0x45a89dc5);
const checksummed = new Uint8Array(4096).map((_, i) => (i * 31 + 7) & 0xff);

/** The CPU handler's work, the same as the Rust probe's: FNV-1a (32 bits), `passes` times.
 *
 * The hash starts as an int32 (`| 0`: the same 32 bits). 0x811c9dc5 alone is a double
 * (above 2^31 - 1), and once TurboFan inlines this function into BullMQ's async
 * `processJob`, which it did only with telemetry off (on, bullmq-otel's calls there used
 * up the inlining budget), the loop's `hash` became a float64 phi: every byte converted
 * int32 to double and back with an overflow check, three to five times slower than the
 * same loop compiled on its own. That halved Node's "off" rate for this handler. */
function checksum(passes) {
  let hash = 0x811c9dc5 | 0;
  for (let pass = 0; pass < passes; pass++) {
    for (let i = 0; i < checksummed.length; i++) {
      hash ^= checksummed[i];
      hash = Math.imul(hash, 0x01000193);
    }
  }
  return hash >>> 0;
}

/** One job's CPU work, checked as the Rust handler checks it. */
function oneMillisecondOfCpu() {
  if (checksum(CPU_PASSES) !== CPU_CHECKSUM) {
    throw new Error('the CPU handler does not compute the runner\'s checksum');
  }
}

async function work(concurrency, n) {
  // A wrong checksum would fail every CPU job and leave the run waiting: say so now.
  if (handler === 'cpu1ms') oneMillisecondOfCpu();
  const observed = mode === 'on' ? await otel() : null;
  let first = 0;
  let firstCpu;
  let completed = 0;
  let resolveDone;
  const done = new Promise((resolve) => (resolveDone = resolve));
  const worker = new Worker(
    queueName,
    async () => {
      if (first === 0) {
        first = now();
        firstCpu = process.cpuUsage();
      }
      if (handler === '1ms') await sleep(1);
      else if (handler === 'cpu1ms') oneMillisecondOfCpu();
    },
    { connection, concurrency, telemetry: observed?.telemetry },
  );
  worker.on('completed', () => {
    completed += 1;
    if (completed === n) resolveDone(now());
  });
  const finished = await done;
  // The process's CPU time from the first handler start to the last completion.
  const { user, system } = process.cpuUsage(firstCpu);
  await worker.close();
  const spans = observed ? await observed.finish() : 0;
  process.stdout.write(
    JSON.stringify({
      ms: (finished - first) / 1000,
      cpuMs: (user + system) / 1000,
      spans,
      bullmq: versions.bullmq,
    }) + '\n',
  );
}

if (command === 'work') await work(Number(concurrencyArg), Number(nArg));
else {
  console.error(`unknown command ${command}`);
  process.exit(2);
}
