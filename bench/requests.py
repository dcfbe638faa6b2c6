#!/usr/bin/env python3
"""What a `forgehand run` sent the model, read from its transcript (every
request body as sent), for bench/context.sh and bench/eval_tokens.sh.

    python3 bench/requests.py REPORT.json

REPORT.json is `forgehand run --json`'s output; its `transcript` is read.
Prints one JSON object: `requests`; `input_tokens` (the messages' bytes
/ 4, summed over the requests); `uncached_input_tokens` (the part of each
request that does not extend the request before it message for message:
what a provider's prefix cache cannot serve); `clearings` (batch
clearings of old outputs); `by_request` (each request's input tokens);
and the run's `status`, `reason` and `message`.
Python 3 standard library only.
"""

import json
import sys


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    report = json.load(open(sys.argv[1]))
    events = [json.loads(line) for line in open(report["transcript"])]
    requests = [e["request"]["messages"] for e in events if e.get("event") == "model_call"]
    total = missed = 0
    previous = []
    each = []
    for messages in requests:
        sizes = [len(json.dumps(m, separators=(",", ":"))) for m in messages]
        shared = 0
        while shared < min(len(previous), len(messages)) and previous[shared] == messages[shared]:
            shared += 1
        total += sum(sizes)
        missed += sum(sizes[shared:])
        each.append(sum(sizes) // 4)
        previous = messages
    print(json.dumps({
        "requests": len(requests),
        "input_tokens": total // 4,
        "uncached_input_tokens": missed // 4,
        "clearings": sum(1 for e in events if e.get("event") == "compacted"),
        "by_request": each,
        "status": report.get("status"),
        "reason": report.get("reason"),
        "message": report.get("message"),
    }))


if __name__ == "__main__":
    main()
