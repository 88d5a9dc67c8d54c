// Bull Board's API at its newest 6.x (@bull-board/api 6.21.3), for peer.mjs's
// `board <queue> <status> 6`; the top level holds 9.x. Resolved from this workspace's
// own node_modules.
import { readFileSync } from 'node:fs';

export { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
export { queuesHandler } from '@bull-board/api/dist/handlers/queues.js';

/** The @bull-board/api version loaded, for the tests to check (its package.json is not
 * among the package's exports). */
export const version = JSON.parse(
  readFileSync(new URL('./node_modules/@bull-board/api/package.json', import.meta.url)),
).version;
