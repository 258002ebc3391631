"""The scorer's judge prompt (full profile; hidden from the participant).

Fixed: changing it changes what the full profile's starting/reference
numbers mean. `{prompt}`, `{first}` and `{second}` are filled in; the judge
must answer A, B or tie (judge.parse_verdict). Each pair is asked in both
orders, so a position bias cancels out.
"""

SYSTEM = (
    "You are an impartial expert evaluator of chat assistants. You compare two "
    "replies to the same user message and decide which one serves the user better."
)

TEMPLATE = (
    "[User message]\n{prompt}\n[End of user message]\n\n"
    "[Reply A]\n{first}\n[End of reply A]\n\n"
    "[Reply B]\n{second}\n[End of reply B]\n\n"
    "Judge which reply is more helpful to the user: it answers or engages with what "
    "was asked, is relevant, correct and coherent, and is fluent English. Do not let "
    "the order of the replies or their length by itself influence you; an empty, "
    "off-topic, repetitive or garbled reply is worse than a short relevant one. If "
    "both are equally good or equally bad, say tie.\n\n"
    'Reply with exactly one word: "A", "B" or "tie".'
)
