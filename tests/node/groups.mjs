// Our fair groups for Bull Board: `withGroups(queue)` gives an open-source `bullmq` Queue
// the three methods of BullMQ Pro's QueuePro that Bull Board's BullMQProAdapter reads, so
// that `new BullMQProAdapter(withGroups(queue))` shows the jobs waiting in groups:
//
//   getGroupsByStatus(status, start = 0, end = -1)  -> [{ id, count }]
//   getGroupJobs(groupId, start = 0, end = -1)      -> [Job]
//   getGroupJobsCount(groupId)                      -> number
//
// The adapter folds the jobs of `waiting` groups into its waiting tab, of `limited` and
// `maxed` groups into delayed, and of `paused` groups into paused, and names each job's
// group beside its name. Checked with @bull-board/api 9.10.2 over bullmq 5.81.5 and 6.7.6.
// It needs @bull-board/api 8.6.1 or later: the adapter's earlier versions (from 7.1.0) also
// call getGroupsCountByStatus(), which this does not provide.
//
// It reads the Rust engine's layout (queue-engine/src/ext/commands/groupCommon.lua), with P
// the queue's key prefix ("bull:<queue>:"), and writes nothing:
//   P gs:turns       ZSET  the ring of groups with jobs waiting; the score's band is the
//                          group's status: a turn (waiting), at its concurrency (maxed),
//                          rate-limited (limited), paused
//   P g:<id>:wait    ZSET  the group's waiting jobs, in the order they will start
// A group whose rate window has ended reads as limited until a worker's next take gives it
// a turn (an idle worker wakes for that). Every call is bounded by the range asked for:
// ZRANGEBYSCORE ... LIMIT and ZRANGE, never KEYS or SCAN. BullMQProAdapter itself asks for
// every group (0 to -1) of each status, at most once every five seconds.

/** Where each status of BullMQ Pro's vocabulary sits in the ring's scores. */
const BANDS = {
  waiting: ['0', `(${2 ** 51}`],
  maxed: [`${2 ** 51}`, `(${2 ** 52}`],
  limited: [`${2 ** 52}`, `(${2 ** 53}`],
  paused: [`${2 ** 53}`, '+inf'],
};

/** The statuses `getGroupsByStatus` knows, in the order BullMQ Pro names them. */
export const GROUP_STATUSES = Object.keys(BANDS);

/** The queue's Redis client: `queue.client` on bullmq 5, its backend's on bullmq 6. */
function redis(queue) {
  return typeof queue.getBackend === 'function' ? queue.getBackend().client : queue.client;
}

/** ZRANGE's inclusive `start`..`end` (`-1`: to the last) as LIMIT's offset and count. */
function limit(start, end) {
  return [start, end < 0 ? -1 : Math.max(0, end - start + 1)];
}

/**
 * Returns `queue` (an open-source bullmq Queue) with the group getters BullMQProAdapter
 * reads, on our layout. Hand it to the adapter: `new BullMQProAdapter(withGroups(queue))`.
 */
export function withGroups(queue) {
  const waitKey = (groupId) => queue.toKey(`g:${groupId}:wait`);
  const countJobs = async (groupId) => (await redis(queue)).zcard(waitKey(groupId));

  return Object.assign(queue, {
    /** The groups of one status, in ring order, each with the number of jobs it holds. */
    async getGroupsByStatus(status, start = 0, end = -1) {
      const band = BANDS[status];
      if (!band) throw new Error(`unknown group status ${status}; use one of ${GROUP_STATUSES}`);
      const [offset, count] = limit(start, end);
      if (count === 0) return [];
      const client = await redis(queue);
      const ids = await client.zrangebyscore(queue.toKey('gs:turns'), ...band, 'LIMIT', offset, count);
      const counts = await Promise.all(ids.map(countJobs));
      return ids.map((id, i) => ({ id, count: counts[i] }));
    },

    /** The group's waiting jobs, in the order they will start (priority, then arrival). */
    async getGroupJobs(groupId, start = 0, end = -1) {
      const ids = await (await redis(queue)).zrange(waitKey(groupId), start, end);
      const jobs = await Promise.all(ids.map((id) => queue.getJob(id)));
      // An id whose job another client removed has no job left: passed over.
      return jobs.filter(Boolean);
    },

    /** How many jobs wait in the group. */
    getGroupJobsCount: countJobs,
  });
}
