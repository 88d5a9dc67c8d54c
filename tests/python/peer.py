"""The Python BullMQ side of tests/tests/interop/python.rs. One command per run; every
result is one JSON object per line on stdout.

    python peer.py version                       the bullmq version loaded
    python peer.py produce <queue> '<json array of {name, data, opts}>'
    python peer.py work <queue> <count>          process <count> jobs (completed, or
                                                 failed for good), then exit
    python peer.py job <queue> <id>              one job as Python reads it, with its state

The worker returns {"echo": data, "by": "python"}, and fails every attempt of a job whose
data says `failAlways`.

Environment: REDIS_URL (default redis://127.0.0.1:6379), PREFIX (default bull).
"""

import asyncio
import json
import os
import sys

import bullmq
from bullmq import Queue, Worker

URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
PREFIX = os.environ.get("PREFIX", "bull")
OPTS = {"connection": URL, "prefix": PREFIX}


def emit(value):
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


async def version(_queue, _arg):
    emit({"bullmq": bullmq.__version__})


async def produce(queue_name, arg):
    queue = Queue(queue_name, OPTS)
    for job in json.loads(arg):
        added = await queue.add(job["name"], job["data"], job.get("opts") or {})
        emit({"added": added.id})
    await queue.close()


async def work(queue_name, arg):
    wanted = int(arg)
    finished = 0
    done = asyncio.Event()

    async def process(job, _token):
        emit({"id": job.id, "name": job.name, "data": job.data, "opts": job.opts,
              "attemptsMade": job.attemptsMade})
        if isinstance(job.data, dict) and job.data.get("failAlways"):
            raise Exception("python says: this job always fails")
        return {"echo": job.data, "by": "python"}

    def settle():
        nonlocal finished
        finished += 1
        if finished >= wanted:
            done.set()

    def on_failed(job, _err):
        if job.attemptsMade >= job.opts.get("attempts", 1):
            settle()

    worker = Worker(queue_name, process, OPTS)
    worker.on("completed", lambda _job, _result: settle())
    worker.on("failed", on_failed)
    await done.wait()
    await worker.close()


async def job(queue_name, job_id):
    queue = Queue(queue_name, OPTS)
    found = await queue.getJob(job_id)
    if found is None:
        emit({"job": None})
    else:
        emit({"job": {
            "id": found.id, "name": found.name, "data": found.data,
            "returnvalue": found.returnvalue, "failedReason": found.failedReason,
            "attemptsMade": found.attemptsMade, "state": await found.getState(),
        }})
    await queue.close()


COMMANDS = {"version": version, "produce": produce, "work": work, "job": job}


def main():
    args = sys.argv[1:] + [None, None, None]
    command, queue_name, arg = args[0], args[1], args[2]
    if command not in COMMANDS:
        sys.stderr.write(f"unknown command {command}; use one of {', '.join(COMMANDS)}\n")
        sys.exit(2)
    asyncio.run(COMMANDS[command](queue_name, arg))


main()
