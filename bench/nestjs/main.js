// The NestJS side of the HTTP bench: NestJS 11 + @nestjs/bullmq over Node BullMQ 6,
// answering `POST /enqueue` with 202 and the new job's id, as a NestJS user writes it.
// The bench (bench/src/runner/http.rs, `System::Nest`) runs it beside the Rust servers:
//
//   REDIS_URL=redis://127.0.0.1:6379 node bench/nestjs/main.js <port>
//
// and loads it with wrk (2 threads, 64 connections, POST of
// {"to":"ada@example.com","subject":"welcome"} as application/json), then counts
// `LLEN bull:bench-http:wait` against wrk's answers. It listens on 127.0.0.1:<port>.
//
// Plain JavaScript, so that no build step stands between `npm ci` and the run: the
// decorators are applied with `Reflect.decorate`, which is what tsc emits for this
// TypeScript (with `emitDecoratorMetadata`, as the Nest CLI's tsconfig has it):
//
//   @Controller()
//   export class AppController {
//     constructor(@InjectQueue('bench-http') private readonly queue: Queue) {}
//
//     @Post('enqueue')
//     @HttpCode(202)
//     async enqueue(@Body() body: EmailDto) {
//       const job = await this.queue.add('email', body);
//       return { jobId: job.id };
//     }
//   }
//
//   @Module({
//     imports: [
//       BullModule.forRoot({ connection: { host, port } }),
//       BullModule.registerQueue({ name: 'bench-http' }),
//     ],
//     controllers: [AppController],
//   })
//   export class AppModule {}
//
// Everything else is Nest's default: the Express adapter with its JSON body parser, no
// global pipes or interceptors, BullMQ's key prefix `bull`. Nest's logger is off
// (`logger: false`) so that it costs the run nothing; `abortOnError: false` makes a
// failure on start reach the catch below (Nest's own handler would log it through the
// logger that is off, then exit 1 in silence), which prints it and exits 1. The app
// listens once the queue's Redis connection is ready (5 s at most, else exit 1): a start
// check for the bench's sake, outside the request path.
// NODE_ENV is left to the environment: Express reads it only for its view cache and
// for stack traces in the error pages Nest's exception filter keeps it from sending.

'use strict';

require('reflect-metadata');
const { Body, Controller, HttpCode, Module, Post } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { BullModule, InjectQueue, getQueueToken } = require('@nestjs/bullmq');
const { Queue } = require('bullmq');

const QUEUE = 'bench-http';

// What tsc emits for a parameter decorator (`__param`).
const param = (index, decorator) => (target, key) => decorator(target, key, index);

class AppController {
  constructor(queue) {
    this.queue = queue;
  }

  async enqueue(body) {
    const job = await this.queue.add('email', body);
    return { jobId: job.id };
  }
}
Reflect.decorate(
  [
    Post('enqueue'),
    HttpCode(202),
    param(0, Body()),
    Reflect.metadata('design:type', Function),
    Reflect.metadata('design:paramtypes', [Object]),
    Reflect.metadata('design:returntype', Promise),
  ],
  AppController.prototype,
  'enqueue',
  Object.getOwnPropertyDescriptor(AppController.prototype, 'enqueue'),
);
Reflect.decorate(
  [
    Controller(),
    param(0, InjectQueue(QUEUE)),
    Reflect.metadata('design:paramtypes', [Queue]),
  ],
  AppController,
);

function redisConnection(url) {
  const u = new URL(url);
  if (u.protocol !== 'redis:') {
    throw new Error(`REDIS_URL: only redis:// is supported, not ${u.protocol}//`);
  }
  const connection = { host: u.hostname || '127.0.0.1', port: Number(u.port || 6379) };
  if (u.username) connection.username = decodeURIComponent(u.username);
  if (u.password) connection.password = decodeURIComponent(u.password);
  const db = u.pathname.replace(/^\//, '');
  if (db) connection.db = Number(db);
  return connection;
}

async function main() {
  const port = Number(process.argv[2]);
  if (!Number.isInteger(port) || port <= 0 || port > 65535) {
    throw new Error(
      'usage: node bench/nestjs/main.js <port>   (env REDIS_URL, default redis://127.0.0.1:6379)',
    );
  }
  const redisUrl = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
  const connection = redisConnection(redisUrl);

  class AppModule {}
  Reflect.decorate(
    [
      Module({
        imports: [
          BullModule.forRoot({ connection }),
          BullModule.registerQueue({ name: QUEUE }),
        ],
        controllers: [AppController],
      }),
    ],
    AppModule,
  );

  const app = await NestFactory.create(AppModule, { logger: false, abortOnError: false });
  // The bench starts wrk once the port answers, so listen only once the queue's Redis
  // does (ioredis would retry for ever and every request hang); give up after 5 s, within
  // the 10 s the bench waits for the port.
  const queue = app.get(getQueueToken(QUEUE));
  let timer;
  await Promise.race([
    queue.waitUntilReady(),
    new Promise((_, reject) => {
      const late = () => reject(new Error(`Redis at ${redisUrl} did not answer in 5 s`));
      timer = setTimeout(late, 5_000);
    }),
  ]);
  clearTimeout(timer);
  await app.listen(port, '127.0.0.1');
}

main().catch((err) => {
  process.stderr.write(`nestjs bench app: ${(err && err.stack) || err}\n`);
  process.exit(1);
});
