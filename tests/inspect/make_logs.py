"""Writes real Inspect eval logs for rebench's import tests.

Usage: python make_logs.py OUT_DIR

A tiny task is run by `inspect_ai` itself with its offline `mockllm` model
(every scripted output carries usage, so no tokenizer is downloaded): two
samples, two epochs, a bash tool in the local sandbox, an intermediate score
after each turn, a time and a working limit, and one sample that errors.
The same eval is written as `.eval` (zip) and as `.json`.
"""

import sys
from pathlib import Path

from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import Score, Target, accuracy, scorer, score
from inspect_ai.solver import Generate, TaskState, generate, solver, use_tools
from inspect_ai.tool import bash


def with_usage(output: ModelOutput, tokens_in: int, tokens_out: int) -> ModelOutput:
    output.usage = ModelUsage(
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        total_tokens=tokens_in + tokens_out,
    )
    return output


def scripted_outputs():
    """For each (sample, epoch): a bash call, then the answer."""
    while True:
        yield with_usage(
            ModelOutput.for_tool_call(
                model="mockllm/model",
                tool_name="bash",
                tool_arguments={"command": "echo 41 + 1 is $((41 + 1))"},
            ),
            100,
            20,
        )
        yield with_usage(
            ModelOutput.from_content(model="mockllm/model", content="42"), 150, 5
        )


@scorer(metrics=[accuracy()])
def numeric():
    """The answer as a number (0 when it is none): a raw score to normalize."""

    async def run(state: TaskState, target: Target) -> Score:
        text = state.output.completion.strip() if state.output else ""
        try:
            value = float(text)
        except ValueError:
            value = 0.0
        return Score(value=value, answer=text, explanation=f"read {text!r}")

    return run


@solver
def scored_turns():
    """Generates with tools, taking an intermediate score before and after."""

    async def solve(state: TaskState, generate_: Generate) -> TaskState:
        if state.sample_id == "broken":
            raise RuntimeError("the sample's setup failed on purpose")
        await score(state)
        state = await generate_(state)
        await score(state)
        return state

    return solve


def main(out: Path) -> None:
    task = Task(
        name="arith",
        dataset=[
            Sample(id="forty-two", input="What is 41 + 1?", target="42"),
            Sample(id="broken", input="This sample errors.", target="0"),
        ],
        solver=[use_tools([bash()]), scored_turns()],
        scorer=numeric(),
        epochs=2,
        sandbox="local",
        time_limit=600,
        working_limit=300,
    )
    for fmt in ("eval", "json"):
        model = get_model("mockllm/model", custom_outputs=scripted_outputs())
        [log] = eval(
            task,
            model=model,
            log_dir=str(out / fmt),
            log_format=fmt,
            display="none",
            fail_on_error=False,
            max_samples=1,
        )
        print(log.location, log.status)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
