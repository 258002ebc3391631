"""Reads an eval log with inspect_ai and prints what rebench's tests check.

Usage: python read_log.py LOG

Prints one JSON object: the header's fields, the sample as
`read_eval_log` validated it, its events in short, the summaries as
`read_eval_log_sample_summaries` gives them, and the logs that
`list_eval_logs` (what `inspect view` lists) finds beside it.
"""

import json
import os
import sys

from inspect_ai.log import (
    list_eval_logs,
    read_eval_log,
    read_eval_log_sample_summaries,
)


def short(event):
    out = {"event": event.event, "working_start": event.working_start}
    if event.event == "tool":
        out.update(function=event.function, arguments=event.arguments, result=event.result)
        out["error"] = event.error.message if event.error else None
    elif event.event == "score":
        out.update(value=event.score.value, answer=event.score.answer,
                   intermediate=event.intermediate)
    elif event.event == "info":
        out.update(data=event.data)
    elif event.event == "model":
        out.update(model=event.model, input=[m.role for m in event.input],
                   completion=event.output.completion,
                   tokens=event.output.usage.total_tokens if event.output.usage else None)
    return out


def main(path):
    log = read_eval_log(path, resolve_attachments=True)
    [sample] = log.samples
    summaries = read_eval_log_sample_summaries(path)
    listed = [os.path.basename(i.name) for i in list_eval_logs(os.path.dirname(path))]
    print(json.dumps({
        "status": log.status,
        "task": log.eval.task,
        "model": log.eval.model,
        "solver": log.eval.solver,
        "working_limit": log.eval.config.working_limit,
        "results": [s.metrics["mean"].value for s in log.results.scores] if log.results else [],
        "id": sample.id,
        "input": sample.input,
        "scores": {k: {"value": v.value, "answer": v.answer} for k, v in (sample.scores or {}).items()},
        "working_time": sample.working_time,
        "total_time": sample.total_time,
        "limit": sample.limit.type if sample.limit else None,
        "model_usage": {k: v.total_tokens for k, v in sample.model_usage.items()},
        "messages": [m.role for m in sample.messages],
        "events": [short(e) for e in sample.events],
        "summaries": [{"id": s.id, "epoch": s.epoch, "completed": s.completed} for s in summaries],
        "listed": listed,
    }, default=str))


if __name__ == "__main__":
    main(sys.argv[1])
