"""The Python BullMQ side of tests/tests/interop/python.rs. One command per run; every
result is one JSON object per line on stdout.

    python peer.py version                       the bullmq version loaded
    python peer.py produce <queue> '<json array of {name, data, opts}>'
    python peer.py work <queue> <count>          process <count> jobs (completed, or
                                                 failed for good), then exit
    python peer.py job <queue> <id>              one job as Python reads it, with its state
    python peer.py produce-sealed <queue> '<json array>'
                                                 `produce` with each job's data sealed
                                                 (sealed.py) with the current key of
                                                 QUEUE_KEYS
    python peer.py open-sealed <queue> <field> '<json>'
                                                 opens the value as sealed for <field>
                                                 ("data" or "returnvalue") of <queue> with
                                                 QUEUE_KEYS: prints {"opened": value} (a value
                                                 that is not sealed as it is) or
                                                 {"error": message}

The worker returns {"echo": data, "by": "python"}, and fails every attempt of a job whose
data says `failAlways`.

Environment: REDIS_URL (default redis://127.0.0.1:6379), PREFIX (default bull);
QUEUE_KEYS (the keyring text of docs/encryption.md) for the sealed commands.
"""

import asyncio
import json
import os
import sys

import bullmq
from bullmq import Queue, Worker

from sealed import open_sealed as open_value, parse_keyring, seal

URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
PREFIX = os.environ.get("PREFIX", "bull")
OPTS = {"connection": URL, "prefix": PREFIX}


def emit(value):
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


async def version(_queue, _arg):
    emit({"bullmq": bullmq.__version__})


async def produce(queue_name, arg, prepare=lambda data: data):
    """Adds the jobs, with each one's data as `prepare` makes it."""
    queue = Queue(queue_name, OPTS)
    for job in json.loads(arg):
        added = await queue.add(job["name"], prepare(job["data"]), job.get("opts") or {})
        emit({"added": added.id})
    await queue.close()


def queue_keys():
    """The keyring of the sealed commands."""
    text = os.environ.get("QUEUE_KEYS")
    if not text:
        raise SystemExit("QUEUE_KEYS is not set: the sealed commands need a keyring")
    return parse_keyring(text)


async def produce_sealed(queue_name, arg):
    keyring = queue_keys()
    await produce(queue_name, arg, lambda data: seal(keyring, queue_name, "data", data))


async def open_sealed(queue_name, field, value):
    """What the keyring opens of a value sealed for `field` of the queue."""
    keyring = queue_keys()
    value = json.loads(value)
    try:
        emit({"opened": open_value(keyring, queue_name, field, value)})
    except ValueError as error:
        emit({"error": str(error)})


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


COMMANDS = {"version": version, "produce": produce, "work": work, "job": job,
            "produce-sealed": produce_sealed, "open-sealed": open_sealed}


def main():
    args = sys.argv[1:] + [None, None, None]
    command, queue_name, arg = args[0], args[1], args[2]
    if command not in COMMANDS:
        sys.stderr.write(f"unknown command {command}; use one of {', '.join(COMMANDS)}\n")
        sys.exit(2)
    # Any argument after <arg> (open-sealed's value) goes on as it is.
    asyncio.run(COMMANDS[command](queue_name, arg, *sys.argv[4:]))


main()
