// The Node BullMQ side of the benchmarks, driven by `queue-bench` (bench/src). One command
// per run; the result is one JSON object on stdout.
//
//   node bench.mjs enqueue <queue> <single|inflight|bulk> <n> [groups]   -> {"ms"}
//   node bench.mjs work <queue> <concurrency> <n>               -> {"ms", "coldMs", "cpuMs", "peakRssKb"}
//   node bench.mjs latency <queue> <n>                          -> {"samplesUs": [..]}
//   node bench.mjs scenario <name>                              -> {"ms", "timed"}
//
// `enqueue ... <groups>`: each job in group `tenant-<i % groups>` (BullMQ Pro's option,
// which open-source BullMQ keeps), removed once completed, as a Node producer of a
// grouped queue adds them.
//
// `scenario`: one of BullMQ's own four (taskforcesh/bullmq-bench), timed as the Rust side
// times them (bench/src/probe/scenarios.rs says how, and how bullmq-bench's print differs).
//
// Environment: REDIS_URL (default redis://127.0.0.1:6379); BULLMQ=5 runs BullMQ 5.x (the
// `bullmq5` alias of package.json), anything else the 6.x. Prefix: BullMQ's default, "bull".
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';

const { Queue, Worker } = await import(process.env.BULLMQ === '5' ? 'bullmq5' : 'bullmq');

const url = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const connection = { host: url.hostname, port: Number(url.port || 6379), maxRetriesPerRequest: null };
const [command, queueName, ...args] = process.argv.slice(2);
const email = (n) => ({ to: `user${n}@example.com`, subject: `welcome ${n}` });
const print = (value) => process.stdout.write(JSON.stringify(value) + '\n');
const now = () => Number(process.hrtime.bigint() / 1000n);

// The process's peak resident set, as the kernel counts it (same source as the Rust side).
function peakRssKb() {
  const line = readFileSync('/proc/self/status', 'utf8').split('\n').find((l) => l.startsWith('VmHWM:'));
  return line ? Number(line.replace(/\D+/g, '')) : 0;
}

async function enqueue(mode, n, groups) {
  const queue = new Queue(queueName, { connection });
  await queue.waitUntilReady();
  const opts = (i) => (groups ? { group: { id: `tenant-${i % groups}` }, removeOnComplete: true } : undefined);
  const started = now();
  if (mode === 'single') {
    for (let i = 0; i < n; i++) await queue.add('email', email(i), opts(i));
  } else if (mode === 'inflight') {
    let next = 0;
    const lane = async () => {
      while (next < n) {
        const i = next++;
        await queue.add('email', email(i), opts(i));
      }
    };
    await Promise.all(Array.from({ length: 100 }, lane));
  } else {
    for (let i = 0; i < n; i += 1000) {
      const batch = [];
      for (let j = i; j < Math.min(n, i + 1000); j++) batch.push({ name: 'email', data: email(j), opts: opts(j) });
      await queue.addBulk(batch);
    }
  }
  const ms = (now() - started) / 1000;
  await queue.close();
  print({ ms });
}

async function work(concurrency, n) {
  let first = 0;
  let firstCpu;
  let completed = 0;
  let resolveDone;
  const done = new Promise((resolve) => (resolveDone = resolve));
  const created = now();
  const worker = new Worker(
    queueName,
    async () => {
      if (first === 0) {
        first = now();
        firstCpu = process.cpuUsage();
      }
    },
    { connection, concurrency },
  );
  worker.on('completed', () => {
    completed += 1;
    if (completed === n) resolveDone(now());
  });
  const finished = await done;
  // CPU time from the first handler start to the last completion, as the Rust side.
  const { user, system } = process.cpuUsage(firstCpu);
  const rss = peakRssKb();
  await worker.close();
  print({
    ms: (finished - first) / 1000,
    coldMs: (finished - created) / 1000,
    cpuMs: (user + system) / 1000,
    peakRssKb: rss,
  });
}

async function latency(n) {
  const queue = new Queue(queueName, { connection });
  let started;
  const worker = new Worker(
    queueName,
    async (job) => {
      started({ sent: job.data.sentUs, at: now() });
    },
    { connection, concurrency: 1 },
  );
  await worker.waitUntilReady();
  await queue.waitUntilReady();
  const samplesUs = [];
  for (let i = 0; i < n; i++) {
    const seen = new Promise((resolve) => (started = resolve));
    await queue.add('ping', { sentUs: now() });
    const { sent, at } = await seen;
    samplesUs.push(at - sent);
  }
  await worker.close();
  await queue.close();
  print({ samplesUs });
}

const SCENARIOS = {
  'queue-add': { warmup: 1000, timed: 1000, bulk: 0, width: 10, depth: 10 },
  'queue-add-bulk': { warmup: 1000, timed: 10000, bulk: 50, width: 1, depth: 1 },
  'worker-generic': { warmup: 1000, timed: 1000, bulk: 100, concurrency: 1, width: 1, depth: 1 },
  'worker-concurrent': { warmup: 1000, timed: 10000, bulk: 100, concurrency: 100, width: 1, depth: 1 },
};

// bullmq-bench's sample data: `width` fresh UUID keys, each a chain `depth` objects deep.
function sample(width, depth) {
  const object = {};
  for (let i = 0; i < width; i++) {
    let chain = {};
    for (let d = 1; d < depth; d++) chain = { [randomUUID()]: chain };
    object[randomUUID()] = chain;
  }
  return object;
}

async function scenario(name) {
  const s = SCENARIOS[name];
  if (!s) throw new Error(`no scenario ${name}`);
  const queue = new Queue(`bench-${name}`, { connection });
  await queue.waitUntilReady();
  const total = s.warmup + s.timed;
  // One payload and one result for the run, as bullmq-bench makes them.
  const data = sample(s.width, s.depth);
  const result = sample(1, 1);
  const many = (n) => Array.from({ length: n }, () => ({ name: 'test', data }));
  let opened;
  if (s.concurrency === undefined) {
    let sent = 0;
    while (sent < total) {
      if (sent === s.warmup) opened = now();
      if (s.bulk === 0) {
        await queue.add('test', data);
        sent += 1;
      } else {
        const size = Math.min(s.bulk, (sent < s.warmup ? s.warmup : total) - sent);
        await queue.addBulk(many(size));
        sent += size;
      }
    }
  } else {
    for (let sent = 0; sent < total; sent += s.bulk) await queue.addBulk(many(Math.min(s.bulk, total - sent)));
    let started = 0;
    let completed = 0;
    let resolveDone;
    const done = new Promise((resolve) => (resolveDone = resolve));
    const worker = new Worker(
      queue.name,
      async () => {
        if (started++ === s.warmup) opened = now();
        return result;
      },
      { connection, concurrency: s.concurrency },
    );
    worker.on('completed', () => {
      completed += 1;
      if (completed === total) resolveDone();
    });
    await done;
    const ms = (now() - opened) / 1000;
    await worker.close();
    await queue.close();
    print({ ms, timed: s.timed });
    return;
  }
  const ms = (now() - opened) / 1000;
  await queue.close();
  print({ ms, timed: s.timed });
}

if (command === 'enqueue') await enqueue(args[0], Number(args[1]), Number(args[2] ?? 0));
else if (command === 'work') await work(Number(args[0]), Number(args[1]));
else if (command === 'latency') await latency(Number(args[0]));
else if (command === 'scenario') await scenario(queueName);
else {
  console.error(`unknown command ${command}`);
  process.exit(2);
}
