// The Node BullMQ side of the interop tests. One command per run; every result is one
// JSON object per line on stdout, read by tests/tests/interop/node.rs.
//
//   node peer.mjs produce <queue> '<json array of {name, data, opts}>'
//   node peer.mjs work <queue> <count>     process <count> jobs, then exit
//   node peer.mjs events <queue> <count>   print stream events until <count> "completed"
//   node peer.mjs counts <queue>
//   node peer.mjs produce-traced <queue> '<json array>'   add inside a span, with bullmq-otel
//   node peer.mjs work-traced <queue> <count>             process with bullmq-otel
//   node peer.mjs flow - '<json flow tree>'                Node's FlowProducer adds the tree
//                                                          ({name, queueName, data, opts,
//                                                          children}); prints its ids
//   node peer.mjs board <queue> <status> [6]              what Bull Board's API shows of the
//                                                          queue and its jobs in <status>:
//                                                          @bull-board/api 9.x, or its newest
//                                                          6.x with `6` (its version in
//                                                          `boardVersion`)
//   node peer.mjs board-groups <queue> <status> [group]    what Bull Board 9.x's BullMQProAdapter
//                                                          over withGroups(queue) (groups.mjs)
//                                                          shows of <status>, then {groups}: the
//                                                          groups of each status it reads, then
//                                                          with <group>, {group, count, jobs}:
//                                                          that group's jobs as Bull Board
//                                                          formats them
//   node peer.mjs produce-validated <queue> '<{schemas, jobs}>'
//                                                          checks each job's data against the
//                                                          payload schema of its name in
//                                                          `schemas` (our QueueApp::job_schemas
//                                                          document) with ajv, adds the ones
//                                                          that pass, and prints {added} or
//                                                          {refused, errors} for each
//
//   node peer.mjs version                                 the BullMQ and bullmq-otel versions loaded
//   node peer.mjs pause|resume <queue>                    Queue.pause() / Queue.resume()
//   node peer.mjs paused <queue>                          {paused: Queue.isPaused()}
//   node peer.mjs upsert-scheduler <queue> '<{id, repeat, name, data, opts}>'
//                                                          Queue.upsertJobScheduler; prints its first job
//   node peer.mjs schedulers <queue>                      every scheduler, as Node reads it
//   node peer.mjs remove-scheduler <queue> <id>
//   node peer.mjs job <queue> <id>                        one job as Node reads it, with its state
//   node peer.mjs jobs <queue> '<json array of ids>'      each job as Job.fromId reads it, one
//                                                          {job} line per id in order ({job: null}
//                                                          for one not found): `job`'s fields, and
//                                                          timestamp, delay, priority,
//                                                          attemptsStarted, processedBy, stacktrace
//
//   node peer.mjs produce-sealed <queue> '<json array>'   `produce` with each job's data sealed
//                                                          (sealed.mjs) with the current key of
//                                                          QUEUE_KEYS
//   node peer.mjs work-sealed <queue> <count>             `work`'s worker, whose processor opens
//                                                          each job's data with QUEUE_KEYS, prints
//                                                          {opened: {id, name, data}}, and returns
//                                                          {handledBy: "node", echo: <data>}
//                                                          sealed; a job whose data does not open
//                                                          fails for good with the error's message
//   node peer.mjs open-sealed <queue> <field> '<json>'    opens the value as sealed for <field>
//                                                          ("data" or "returnvalue") of <queue>
//                                                          with QUEUE_KEYS: prints {opened: value}
//                                                          (a value that is not sealed as it is)
//                                                          or {error: message}
//
// The traced commands print every span they ended as {span: {name, kind, traceId,
// spanId, parentSpanId}}. The worker (`work`, `work-traced`) reports each value of a
// job's `data.progress` array with job.updateProgress before it returns, and fails every
// attempt of a job whose data says `failAlways` (the first one with `failFirst`).
//
// Environment: REDIS_URL (default redis://127.0.0.1:6379), PREFIX (default bull);
// REDIS_CLUSTER_NODES (comma-separated seed URLs) puts it on that Redis Cluster instead;
// BULLMQ=6 runs Node BullMQ 6.x with bullmq-otel 2.x (the workspace bullmq6/) instead of
// 5.x with bullmq-otel 1.x. QUEUE_KEYS (the keyring text of docs/encryption.md) for the
// *-sealed commands.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Cluster } from 'ioredis';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { BullMQProAdapter } from '@bull-board/api/bullMQProAdapter';
import { formatJob, queuesHandler } from '@bull-board/api/dist/handlers/queues.js';
import Ajv2020 from 'ajv/dist/2020.js';
import { context, propagation, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { GROUP_STATUSES, withGroups } from './groups.mjs';
import { open, parseKeyring, seal } from './sealed.mjs';

// The BullMQ major under test: 5 (this package's own) or 6 (the bullmq6/ workspace).
const major = process.env.BULLMQ ?? '5';
const lib = await (async () => {
  if (major === '6') return import('queue-tests-node-peer-bullmq6');
  if (major !== '5') throw new Error(`BULLMQ must be 5 or 6, not ${major}`);
  const require = createRequire(import.meta.url);
  return {
    ...(await import('bullmq')),
    BullMQOtel: (await import('bullmq-otel')).BullMQOtel,
    versions: {
      bullmq: require('bullmq/package.json').version,
      bullmqOtel: require('bullmq-otel/package.json').version,
    },
    otelOptions: (name) => name,
  };
})();
const { FlowProducer, Job, Queue, QueueEvents, Worker, BullMQOtel, UnrecoverableError } = lib;

const hostPort = (address) => {
  const url = new URL(address);
  return { host: url.hostname, port: Number(url.port || 6379) };
};
const clusterNodes = (process.env.REDIS_CLUSTER_NODES ?? '').split(',').filter(Boolean);
const connection = clusterNodes.length > 0
  ? new Cluster(clusterNodes.map(hostPort), { redisOptions: { maxRetriesPerRequest: null } })
  : { ...hostPort(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'), maxRetriesPerRequest: null };
const prefix = process.env.PREFIX ?? 'bull';
// The arguments after the queue: board's <status> [6], open-sealed's <field> '<json>', ...
const [command, queueName, arg, arg2] = process.argv.slice(2);
const print = (value) => process.stdout.write(JSON.stringify(value) + '\n');

// Adds the jobs, with each one's data as `prepare` makes it.
async function produce(prepare = (data) => data) {
  const queue = new Queue(queueName, { connection, prefix });
  for (const { name, data, opts } of JSON.parse(arg)) {
    const job = await queue.add(name, prepare(data), opts);
    print({ added: job.id });
  }
  await queue.close();
}

// The processor of `work` and `work-traced`: prints the job (with telemetry, also the
// trace the handler ran in), reports its progress, fails as its data asks, and echoes it.
async function echo(job, telemetry) {
  const line = { id: job.id, name: job.name, data: job.data, opts: job.opts, attemptsMade: job.attemptsMade };
  // A flow parent: what its children returned, keyed as BullMQ keys them.
  const children = await job.getChildrenValues();
  if (Object.keys(children).length > 0) line.childrenValues = children;
  if (telemetry) line.traceId = trace.getActiveSpan()?.spanContext().traceId ?? null;
  print(line);
  for (const progress of job.data?.progress ?? []) await job.updateProgress(progress);
  if (job.data && job.data.failFirst && job.attemptsMade === 0) {
    throw new Error('node says: first attempt fails');
  }
  if (job.data && job.data.failAlways) throw new Error('node says: this job always fails');
  return { echo: job.data, by: 'node' };
}

// Processes <count> jobs with `processor` (counting final failures: the last attempt, or
// an UnrecoverableError).
async function runWorker(telemetry, processor = (job) => echo(job, telemetry)) {
  const wanted = Number(arg);
  let finished = 0;
  let resolveDone;
  const done = new Promise((resolve) => (resolveDone = resolve));
  const worker = new Worker(queueName, processor, { connection, prefix, concurrency: 4, telemetry });
  const settle = () => {
    finished += 1;
    if (finished >= wanted) resolveDone();
  };
  worker.on('completed', settle);
  worker.on('failed', (job, error) => {
    const unrecoverable = error instanceof UnrecoverableError || error?.name === 'UnrecoverableError';
    if (job && (unrecoverable || job.attemptsMade >= (job.opts.attempts ?? 1))) settle();
  });
  await done;
  await worker.close();
}

async function work() {
  await runWorker(undefined);
}

// The keyring of the *-sealed commands.
function queueKeys() {
  if (!process.env.QUEUE_KEYS) throw new Error('QUEUE_KEYS is not set: the sealed commands need a keyring');
  return parseKeyring(process.env.QUEUE_KEYS);
}

function produceSealed() {
  const keyring = queueKeys();
  return produce((data) => seal(keyring, queueName, 'data', data));
}

// `work` for sealed jobs: open the data (a job whose data does not open fails for good:
// another attempt would not open it either), and seal what it returns.
function workSealed() {
  const keyring = queueKeys();
  return runWorker(undefined, async (job) => {
    let data;
    try {
      data = open(keyring, queueName, 'data', job.data);
    } catch (error) {
      throw new UnrecoverableError(error.message);
    }
    print({ opened: { id: job.id, name: job.name, data } });
    return seal(keyring, queueName, 'returnvalue', { handledBy: 'node', echo: data });
  });
}

// What the keyring opens of a value sealed for <field> of the queue.
function openSealed() {
  const keyring = queueKeys();
  const value = JSON.parse(arg2);
  try {
    print({ opened: open(keyring, queueName, arg, value) });
  } catch (error) {
    print({ error: error.message });
  }
}

async function events() {
  const wanted = Number(arg);
  const queueEvents = new QueueEvents(queueName, { connection, prefix, lastEventId: '0-0' });
  let completed = 0;
  await new Promise((resolve) => {
    for (const name of ['added', 'active', 'progress', 'completed', 'failed']) {
      queueEvents.on(name, (event) => {
        print({ event: name, ...event });
        if (name === 'completed' && ++completed >= wanted) resolve();
      });
    }
  });
  await queueEvents.close();
}

async function counts() {
  const queue = new Queue(queueName, { connection, prefix });
  print(await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'completed', 'failed'));
  await queue.close();
}

// OpenTelemetry as an application sets it up: a tracer provider, the async context, and
// the W3C propagator that bullmq-otel uses to write and read a job's `tm` option.
function otel() {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  const printSpans = () => {
    for (const span of exporter.getFinishedSpans()) {
      const { traceId, spanId } = span.spanContext();
      const parentSpanId = span.parentSpanContext?.spanId ?? null;
      print({ span: { name: span.name, kind: span.kind, traceId, spanId, parentSpanId } });
    }
  };
  return { telemetry: new BullMQOtel(lib.otelOptions('queue-tests-peer')), printSpans };
}

async function produceTraced() {
  const { telemetry, printSpans } = otel();
  const queue = new Queue(queueName, { connection, prefix, telemetry });
  const tracer = trace.getTracer('queue-tests-peer');
  await tracer.startActiveSpan('request', async (span) => {
    for (const { name, data, opts } of JSON.parse(arg)) {
      const job = await queue.add(name, data, opts);
      print({ added: job.id });
    }
    span.end();
  });
  printSpans();
  await queue.close();
}

async function workTraced() {
  const { telemetry, printSpans } = otel();
  await runWorker(telemetry);
  printSpans();
}

// Node's FlowProducer adds a tree; prints the id of every job, depth first.
async function flow() {
  const producer = new FlowProducer({ connection, prefix });
  const added = await producer.add(JSON.parse(arg));
  const ids = (node) => ({ queue: node.job.queueName, id: node.job.id, children: (node.children ?? []).map(ids) });
  print({ flow: ids(added) });
  await producer.close();
}

// Bull Board's own `GET /api/queues` handler, called as its server adapters call it:
// 9.x (this package's), or the newest 6.x (the bullmq6/ workspace's) when asked.
async function board() {
  const api = arg2 === '6'
    ? await import('queue-tests-node-peer-bullmq6/board.mjs')
    : { BullMQAdapter, queuesHandler, version: boardVersion() };
  const queue = new Queue(queueName, { connection, prefix });
  const queues = new Map([[queueName, new api.BullMQAdapter(queue)]]);
  const query = { activeQueue: queueName, status: arg, page: 1, jobsPerPage: 50 };
  const { body } = await api.queuesHandler({ queues, query, uiConfig: {} });
  print({ ...body.queues[0], boardVersion: api.version });
  await queue.close();
}

// `board` with BullMQProAdapter over our groups (groups.mjs): Bull Board folds the jobs
// waiting in groups into its waiting, delayed and paused tabs.
async function boardGroups() {
  const queue = withGroups(new Queue(queueName, { connection, prefix }));
  const adapter = new BullMQProAdapter(queue);
  const queues = new Map([[queueName, adapter]]);
  const query = { activeQueue: queueName, status: arg, page: 1, jobsPerPage: 50 };
  const { body } = await queuesHandler({ queues, query, uiConfig: {} });
  print({ ...body.queues[0], boardVersion: boardVersion() });
  const groups = {};
  for (const status of GROUP_STATUSES) groups[status] = await queue.getGroupsByStatus(status);
  print({ groups });
  if (arg2) {
    const jobs = await queue.getGroupJobs(arg2);
    const count = await queue.getGroupJobsCount(arg2);
    print({ group: arg2, count, jobs: jobs.map((job) => formatJob(job, adapter)) });
  }
  await queue.close();
}

// The top level's @bull-board/api version (its package.json is not among its exports).
function boardVersion() {
  const path = new URL('./node_modules/@bull-board/api/package.json', import.meta.url);
  return JSON.parse(readFileSync(path)).version;
}

// What a Node producer does with the schemas a Rust service exports: validate before adding.
async function produceValidated() {
  const { schemas, jobs } = JSON.parse(arg);
  const ajv = new Ajv2020({ allErrors: true, strict: false });
  const queue = new Queue(queueName, { connection, prefix });
  for (const { name, data, opts } of jobs) {
    const schema = schemas.queues?.[queueName]?.[name]?.payload;
    if (!schema) {
      print({ refused: name, errors: [{ instancePath: '', message: 'no schema for this job' }] });
      continue;
    }
    const validate = ajv.compile(schema);
    if (!validate(data)) {
      print({
        refused: name,
        errors: validate.errors.map(({ instancePath, message }) => ({ instancePath, message })),
      });
      continue;
    }
    const job = await queue.add(name, data, opts);
    print({ added: job.id });
  }
  await queue.close();
}

function version() {
  print(lib.versions);
}

async function onQueue(act) {
  const queue = new Queue(queueName, { connection, prefix });
  await act(queue);
  await queue.close();
}

const pause = () => onQueue((queue) => queue.pause());
const resume = () => onQueue((queue) => queue.resume());
const paused = () => onQueue(async (queue) => print({ paused: await queue.isPaused() }));

// Node's job scheduler API: upsert one (its first job is added at once or when due).
const upsertScheduler = () =>
  onQueue(async (queue) => {
    const { id, repeat, name, data, opts } = JSON.parse(arg);
    const job = await queue.upsertJobScheduler(id, repeat, { name, data, opts });
    print({ firstJob: job?.id ?? null });
  });
const schedulers = () =>
  onQueue(async (queue) => {
    for (const scheduler of await queue.getJobSchedulers()) print({ scheduler });
  });
const removeScheduler = () =>
  onQueue(async (queue) => print({ removed: await queue.removeJobScheduler(arg) }));

// One job as Node reads it back: what each side must agree on.
const job = () =>
  onQueue(async (queue) => {
    const found = await queue.getJob(arg);
    if (!found) return print({ job: null });
    const { id, name, data, opts, progress, attemptsMade, returnvalue, failedReason, processedOn, finishedOn } = found;
    const state = await found.getState();
    print({ job: { id, name, data, opts, progress, attemptsMade, returnvalue, failedReason, processedOn, finishedOn, state } });
  });

// Many jobs as Job.fromId reads them: what a Node service sees of jobs another worker ran.
const jobs = () =>
  onQueue(async (queue) => {
    for (const id of JSON.parse(arg)) {
      const found = await Job.fromId(queue, id);
      if (!found) {
        print({ job: null });
        continue;
      }
      const { name, data, opts, progress, attemptsMade, attemptsStarted, returnvalue, failedReason } = found;
      const { stacktrace, timestamp, delay, priority, processedOn, finishedOn, processedBy } = found;
      const state = await found.getState();
      print({
        job: {
          id: found.id, name, data, opts, progress, attemptsMade, attemptsStarted, returnvalue, failedReason,
          stacktrace, timestamp, delay, priority, processedOn, finishedOn, processedBy, state,
        },
      });
    }
  });

const commands = {
  board,
  'board-groups': boardGroups,
  job,
  jobs,
  pause,
  paused,
  resume,
  schedulers,
  version,
  'remove-scheduler': removeScheduler,
  'upsert-scheduler': upsertScheduler,
  flow,
  produce,
  work,
  events,
  counts,
  'open-sealed': openSealed,
  'produce-sealed': produceSealed,
  'produce-traced': produceTraced,
  'produce-validated': produceValidated,
  'work-sealed': workSealed,
  'work-traced': workTraced,
};
if (!commands[command]) {
  console.error(`unknown command ${command}; use one of ${Object.keys(commands).join(', ')}`);
  process.exit(2);
}
await commands[command]();
process.exit(0);
