// What peer.mjs takes from Node BullMQ 6.x and bullmq-otel 2.x, resolved from this
// workspace's own node_modules (the top level holds 5.x and bullmq-otel 1.x).
import { createRequire } from 'node:module';

export { FlowProducer, Job, Queue, QueueEvents, UnrecoverableError, Worker } from 'bullmq';
export { BullMQOtel } from 'bullmq-otel';

const require = createRequire(import.meta.url);
/** The versions actually loaded, for the tests to check. */
export const versions = {
  bullmq: require('bullmq/package.json').version,
  bullmqOtel: require('bullmq-otel/package.json').version,
};
/** bullmq-otel 2.x takes an options object (a string is spread into nonsense keys). */
export const otelOptions = (name) => ({ tracerName: name });
